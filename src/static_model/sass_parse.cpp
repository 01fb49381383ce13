#include "static_model/sass_parse.h"

#include <cxxabi.h>

#include <cctype>
#include <cstdlib>
#include <memory>
#include <set>
#include <utility>

#include "common/errors.h"

namespace decodebench::static_model {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

[[noreturn]] void fail(const std::string& source, int line, const std::string& what) {
  throw InputError(source + ":" + std::to_string(line) + ": " + what);
}

bool is_hex(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// "0x21f0" -> 0x21f0; nullopt for anything else.
std::optional<std::uint32_t> parse_address(std::string_view s) {
  if (!starts_with(s, "0x") || !is_hex(s.substr(2)) || s.size() > 10) return std::nullopt;
  return static_cast<std::uint32_t>(std::strtoul(std::string(s.substr(2)).c_str(), nullptr, 16));
}

// Splits operands at top-level commas (not inside [] or {}).
std::vector<std::string> split_operands(std::string_view s) {
  std::vector<std::string> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    const char c = i < s.size() ? s[i] : ',';
    if (c == '[' || c == '{' || c == '(') ++depth;
    if (c == ']' || c == '}' || c == ')') --depth;
    if (c == ',' && depth <= 0) {
      const std::string_view op = trim(s.substr(start, i - start));
      if (!op.empty()) out.emplace_back(op);
      start = i + 1;
    }
  }
  return out;
}

// The body of "/*21f0*/  @!P4 BRA 0x21f0 ;  /* 0x... */" after the address comment.
Instruction parse_instruction(std::uint32_t address, std::string_view body,
                              const std::string& source, int line) {
  const std::size_t semi = body.find(';');
  if (semi == std::string_view::npos) fail(source, line, "an instruction without its ';'");
  std::string_view text = trim(body.substr(0, semi));
  if (text.empty()) fail(source, line, "an empty instruction");
  Instruction in;
  in.address = address;
  in.line = line;
  if (text.front() == '@') {
    const std::size_t sp = text.find_first_of(" \t");
    if (sp == std::string_view::npos) fail(source, line, "a predicate without an instruction");
    in.guard = std::string(text.substr(0, sp));
    text = trim(text.substr(sp));
  }
  const std::size_t sp = text.find_first_of(" \t");
  in.opcode = std::string(text.substr(0, sp));
  if (sp != std::string_view::npos) in.operands = split_operands(text.substr(sp));
  if (in.base() == "BRA") {
    // "BRA 0x21f0", "BRA !P3, 0x4fe0", "BRA.U !UP0, 0x1c0": the address is the last operand.
    if (in.operands.empty()) fail(source, line, "a BRA without a target");
    in.target = parse_address(in.operands.back());
    if (!in.target) {
      fail(source, line, "a BRA whose target '" + in.operands.back() + "' is not an address");
    }
  }
  return in;
}

}  // namespace

std::string_view Instruction::base() const {
  const std::string_view op = opcode;
  return op.substr(0, op.find('.'));
}

bool Instruction::has_modifier(std::string_view m) const {
  std::string_view op = opcode;
  std::size_t dot = op.find('.');
  while (dot != std::string_view::npos) {
    op.remove_prefix(dot + 1);
    dot = op.find('.');
    if (op.substr(0, dot) == m) return true;
  }
  return false;
}

std::vector<Function> parse_sass(std::string_view text, const std::string& source) {
  std::vector<Function> out;
  std::set<std::pair<std::string, std::string>> seen;  // (name, arch) already kept
  std::string arch;
  std::optional<Function> current;
  int current_line = 0;
  bool duplicate = false;
  auto close = [&] {
    if (!current) return;
    if (current->instructions.empty()) {
      fail(source, current_line, "function " + current->name + " has no instructions");
    }
    if (!duplicate) out.push_back(std::move(*current));
    current.reset();
  };
  int line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view raw = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    const std::string_view line = trim(raw);
    if (line.empty()) continue;
    if (starts_with(line, "code for sm_")) {
      arch = std::string(trim(line.substr(9)));
      continue;
    }
    if (starts_with(line, "arch = ")) {
      arch = std::string(trim(line.substr(7)));
      continue;
    }
    if (starts_with(line, "Function : ")) {
      close();
      current = Function{std::string(trim(line.substr(11))), arch, {}};
      current_line = line_no;
      duplicate = !seen.insert({current->name, arch}).second;
      continue;
    }
    if (starts_with(line, "..........")) {  // a function's end
      close();
      continue;
    }
    // "/*21f0*/ ..." is an instruction; "/* 0x000fc0... */" is the rest of its encoding.
    if (starts_with(line, "/*") && !starts_with(line, "/* ")) {
      const std::size_t end = line.find("*/");
      const std::string_view addr = end == std::string_view::npos ? "" : line.substr(2, end - 2);
      if (!is_hex(addr)) continue;  // some other comment
      if (!current) fail(source, line_no, "an instruction outside a function");
      const auto address =
          static_cast<std::uint32_t>(std::strtoul(std::string(addr).c_str(), nullptr, 16));
      if (!current->instructions.empty() && address <= current->instructions.back().address) {
        fail(source, line_no,
             "instruction addresses must increase within a function (" + std::string(addr) +
                 " after " + std::to_string(current->instructions.back().address) + ")");
      }
      current->instructions.push_back(
          parse_instruction(address, line.substr(end + 2), source, line_no));
    }
  }
  close();
  if (out.empty()) {
    fail(source, line_no,
         "no function found (expected `cuobjdump -sass` output with 'Function : NAME' sections)");
  }
  return out;
}

std::vector<ResourceUsage> parse_resource_usage(std::string_view text, const std::string& source) {
  std::vector<ResourceUsage> out;
  std::string arch;
  std::optional<ResourceUsage> pending;
  int pending_line = 0;
  int line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view line = trim(text.substr(pos, eol - pos));
    pos = eol + 1;
    ++line_no;
    if (starts_with(line, "arch = ")) {
      arch = std::string(trim(line.substr(7)));
    } else if (starts_with(line, "Function ")) {
      if (pending) fail(source, pending_line, "function " + pending->name + " has no REG: line");
      std::string_view name = trim(line.substr(9));
      if (!name.empty() && name.back() == ':') name.remove_suffix(1);
      pending = ResourceUsage{std::string(name), arch};
      pending_line = line_no;
    } else if (pending && starts_with(line, "REG:")) {
      std::size_t p = 0;
      while (p < line.size()) {
        std::size_t q = line.find(' ', p);
        if (q == std::string_view::npos) q = line.size();
        const std::string_view field = line.substr(p, q - p);
        p = q + 1;
        const std::size_t colon = field.find(':');
        if (colon == std::string_view::npos) continue;
        const std::string_view key = field.substr(0, colon);
        const int value = std::atoi(std::string(field.substr(colon + 1)).c_str());
        if (key == "REG") pending->registers = value;
        if (key == "STACK") pending->stack = value;
        if (key == "SHARED") pending->shared = value;
        if (key == "LOCAL") pending->local = value;
      }
      out.push_back(std::move(*pending));
      pending.reset();
    }
  }
  if (pending) fail(source, pending_line, "function " + pending->name + " has no REG: line");
  return out;
}

std::string demangle(const std::string& mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(
      abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : mangled;
}

}  // namespace decodebench::static_model
