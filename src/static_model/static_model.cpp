#include "static_model/static_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string_view>

#include "quant/kv_quant.h"

namespace decodebench::static_model {
namespace {

bool is_store(std::string_view base) {
  return base == "ST" || base == "STS" || base == "STG" || base == "STL" || base == "RED" ||
         base == "ATOM" || base == "ATOMS" || base == "ATOMG" || base == "LDGSTS" || base == "STSM";
}

// "R102.reuse" -> "R102"; other operands unchanged.
std::string plain_register(std::string_view op) {
  const std::size_t dot = op.find('.');
  return std::string(op.substr(0, dot));
}

// The general registers an operand reads: "R12", "-R12.reuse", "[R15+0x2000]",
// "desc[UR10][R16.64]" (R16 and R17). Uniform (UR), special (SR_) and zero (RZ) registers are
// not general registers.
std::vector<int> registers_in(std::string_view op) {
  std::vector<int> regs;
  for (std::size_t i = 0; i + 1 < op.size(); ++i) {
    if (op[i] != 'R' || !std::isdigit(static_cast<unsigned char>(op[i + 1]))) continue;
    if (i > 0 && (std::isalnum(static_cast<unsigned char>(op[i - 1])) || op[i - 1] == '_')) {
      continue;
    }
    std::size_t j = i + 1;
    while (j < op.size() && std::isdigit(static_cast<unsigned char>(op[j]))) ++j;
    const int r = std::atoi(std::string(op.substr(i + 1, j - i - 1)).c_str());
    regs.push_back(r);
    if (op.substr(j, 3) == ".64") regs.push_back(r + 1);
    i = j - 1;
  }
  return regs;
}

// The general registers `in` reads (its sources; a store's address and data too).
std::vector<int> reads(const Instruction& in) {
  std::vector<int> out;
  const bool store = is_store(in.base());
  for (std::size_t k = store ? 0 : 1; k < in.operands.size(); ++k) {
    for (int r : registers_in(in.operands[k])) out.push_back(r);
  }
  // A load's or ALU op's destination is written, but a bracketed first operand is an address.
  if (!store && !in.operands.empty() && in.operands[0].find('[') != std::string::npos) {
    for (int r : registers_in(in.operands[0])) out.push_back(r);
  }
  return out;
}

// Whether `in` writes `reg` ("R5", "P0") as its first operand (or as a second, predicate, one).
bool writes(const Instruction& in, const std::string& reg) {
  if (in.target || is_store(in.base()) || in.operands.empty()) return false;
  if (plain_register(in.operands[0]) == reg) return true;
  return in.operands.size() > 1 && reg[0] == 'P' && in.operands[1] == reg;
}

// "0x10", "-0x1", "16" -> the value; nullopt for anything else.
std::optional<long> immediate(std::string_view s) {
  bool negative = false;
  if (!s.empty() && s.front() == '-') {
    negative = true;
    s.remove_prefix(1);
  }
  if (s.empty()) return std::nullopt;
  int base = 10;
  if (s.substr(0, 2) == "0x") {
    base = 16;
    s.remove_prefix(2);
  }
  if (s.empty()) return std::nullopt;
  for (char c : s) {
    if (base == 16 ? !std::isxdigit(static_cast<unsigned char>(c))
                   : !std::isdigit(static_cast<unsigned char>(c))) {
      return std::nullopt;
    }
  }
  const long v = std::strtol(std::string(s).c_str(), nullptr, base);
  return negative ? -v : v;
}

bool is_general_register(const std::string& s) {
  return s.size() > 1 && s[0] == 'R' && std::all_of(s.begin() + 1, s.end(), [](char c) {
           return std::isdigit(static_cast<unsigned char>(c));
         });
}

// The pattern a counted loop compiles to: `MOV Ra, imm` before the head, one `IADD3 Ra, Ra, imm,
// RZ` (or VIADD) in the body, `ISETP.<cmp>.AND Pn, PT, Ra, imm, PT` feeding the back edge's
// `@Pn BRA` / `@!Pn BRA`. Anything else is unknown.
std::optional<long> trip_count(const Function& f, const Loop& loop) {
  const auto& ins = f.instructions;
  const Instruction& br = ins[loop.last];
  if (br.guard.size() < 2) return std::nullopt;
  const bool negated = br.guard[1] == '!';
  const std::string pred = br.guard.substr(negated ? 2 : 1);
  std::optional<std::size_t> cmp;
  for (std::size_t k = loop.last; k-- > loop.first;) {
    if (!writes(ins[k], pred)) continue;
    if (ins[k].base() == "ISETP") cmp = k;
    break;
  }
  if (!cmp) return std::nullopt;
  const Instruction& c = ins[*cmp];
  if (!c.guard.empty() || c.operands.size() != 5 || c.operands[1] != "PT" ||
      c.operands[4] != "PT" || !c.has_modifier("AND")) {
    return std::nullopt;
  }
  const std::string counter = plain_register(c.operands[2]);
  const std::optional<long> limit = immediate(c.operands[3]);
  if (!is_general_register(counter) || !limit) return std::nullopt;

  std::optional<std::size_t> step_at;
  long step = 0;
  for (std::size_t k = loop.first; k <= loop.last; ++k) {
    if (!writes(ins[k], counter)) continue;
    if (step_at) return std::nullopt;  // written twice
    const Instruction& s = ins[k];
    const bool iadd3 = s.opcode == "IADD3" && s.operands.size() == 4 && s.operands[3] == "RZ";
    const bool viadd = s.opcode == "VIADD" && s.operands.size() == 3;
    if (!s.guard.empty() || !(iadd3 || viadd) || plain_register(s.operands[1]) != counter) {
      return std::nullopt;
    }
    const std::optional<long> v = immediate(s.operands[2]);
    if (!v || *v == 0) return std::nullopt;
    step_at = k;
    step = *v;
  }
  if (!step_at) return std::nullopt;

  std::optional<long> init;
  for (std::size_t k = loop.first; k-- > 0;) {
    if (!writes(ins[k], counter)) continue;
    const Instruction& m = ins[k];
    if (!m.guard.empty()) return std::nullopt;
    if (m.opcode == "MOV" && m.operands.size() == 2) {
      init = m.operands[1] == "RZ" ? std::optional<long>(0) : immediate(m.operands[1]);
    } else if (m.opcode == "IMAD.MOV.U32" && m.operands.size() == 4 && m.operands[1] == "RZ" &&
               m.operands[2] == "RZ") {
      init = m.operands[3] == "RZ" ? std::optional<long>(0) : immediate(m.operands[3]);
    }
    break;
  }
  if (!init) return std::nullopt;

  const bool is_unsigned = c.has_modifier("U32");
  auto holds = [&](long a) {
    const long b = *limit;
    const auto ua = static_cast<std::uint32_t>(a);
    const auto ub = static_cast<std::uint32_t>(b);
    const auto sa = static_cast<std::int32_t>(a);
    const auto sb = static_cast<std::int32_t>(b);
    if (c.has_modifier("NE")) return ua != ub;
    if (c.has_modifier("EQ")) return ua == ub;
    if (c.has_modifier("LT")) return is_unsigned ? ua < ub : sa < sb;
    if (c.has_modifier("LE")) return is_unsigned ? ua <= ub : sa <= sb;
    if (c.has_modifier("GT")) return is_unsigned ? ua > ub : sa > sb;
    if (c.has_modifier("GE")) return is_unsigned ? ua >= ub : sa >= sb;
    return false;
  };
  if (!(c.has_modifier("NE") || c.has_modifier("EQ") || c.has_modifier("LT") ||
        c.has_modifier("LE") || c.has_modifier("GT") || c.has_modifier("GE"))) {
    return std::nullopt;
  }
  constexpr long kMaxTrips = 1 << 20;
  long r = *init;
  for (long trips = 1; trips <= kMaxTrips; ++trips) {
    const long seen = *step_at < *cmp ? r + step : r;  // the compare after the step sees it
    r += step;
    if (holds(seen) == negated) return trips;  // the back edge is not taken
  }
  return std::nullopt;
}

bool contains(const Loop& outer, const Loop& inner) {
  return outer.first <= inner.first && inner.last <= outer.last &&
         (outer.first != inner.first || outer.last != inner.last);
}

}  // namespace

namespace {
bool is_scale_load(const Instruction& in) {
  return in.base() == "LDGSTS" && !in.has_modifier("BYPASS");
}
bool is_narrow_load(const Instruction& in) {
  return in.base() == "LDG" && !in.has_modifier("64") && !in.has_modifier("128");
}
}  // namespace

int kv_bytes_per_lane(const Instruction& in) {
  const std::string_view b = in.base();
  if (b != "LDG" && b != "LDGSTS") return 0;
  if (is_scale_load(in)) return 0;
  if (in.has_modifier("128")) return 16;
  if (in.has_modifier("64")) return 8;
  return 0;
}

std::vector<Loop> find_loops(const Function& f) {
  const auto& ins = f.instructions;
  std::map<std::uint32_t, std::size_t> index_of;
  for (std::size_t i = 0; i < ins.size(); ++i) index_of[ins[i].address] = i;
  std::map<std::size_t, std::size_t> tail_of;  // head index -> furthest back edge
  for (std::size_t i = 0; i < ins.size(); ++i) {
    if (!ins[i].target || *ins[i].target >= ins[i].address) continue;
    const auto head = index_of.find(*ins[i].target);
    if (head == index_of.end()) continue;  // not an instruction of this function
    std::size_t& tail = tail_of[head->second];
    tail = std::max(tail, i);
  }
  std::vector<Loop> loops;
  for (const auto& [first, last] : tail_of) {
    Loop l;
    l.first = first;
    l.last = last;
    loops.push_back(l);
  }
  // Outer before inner at one head cannot happen (one loop per head), so address order is it.
  for (std::size_t i = 0; i < loops.size(); ++i) {
    for (std::size_t j = 0; j < loops.size(); ++j) {
      if (i == j || !contains(loops[j], loops[i])) continue;
      if (loops[i].parent < 0 ||
          contains(loops[static_cast<std::size_t>(loops[i].parent)], loops[j]))
        loops[i].parent = static_cast<int>(j);
    }
    for (std::size_t k = loops[i].first; k <= loops[i].last; ++k) {
      if (kv_bytes_per_lane(ins[k]) > 0) loops[i].has_kv_loads = true;
    }
    loops[i].trip_count = trip_count(f, loops[i]);
  }
  return loops;
}

MainLoop analyze_main_loop(const Function& f) {
  const auto& ins = f.instructions;
  const std::vector<Loop> loops = find_loops(f);
  auto is_ancestor = [&](std::size_t a, std::size_t d) {
    for (int p = loops[d].parent; p >= 0; p = loops[static_cast<std::size_t>(p)].parent) {
      if (static_cast<std::size_t>(p) == a) return true;
    }
    return false;
  };
  MainLoop m;
  std::optional<std::size_t> main;
  for (std::size_t i = 0; i < loops.size(); ++i) {
    if (!loops[i].has_kv_loads) continue;
    bool innermost = true;
    for (std::size_t j = 0; j < loops.size(); ++j) {
      if (loops[j].has_kv_loads && is_ancestor(i, j)) innermost = false;
    }
    if (!innermost) continue;
    ++m.kv_loops;
    if (!main || loops[i].size() > loops[*main].size()) main = i;
  }
  if (!main) return m;
  const Loop& L = loops[*main];
  m.found = true;
  m.head = ins[L.first].address;
  m.tail = ins[L.last].address;

  // Weight of each instruction: the product of the trip counts of the loops nested in the main
  // loop that hold it (0 for an unknown one).
  std::vector<long> weight(L.size(), 1);
  for (std::size_t j = 0; j < loops.size(); ++j) {
    if (!is_ancestor(*main, j)) continue;
    const long trips = loops[j].trip_count.value_or(0);
    if (!loops[j].trip_count) {
      m.nested_unknown = true;
      // Outermost unknown loops only, so a body is not added twice.
      bool inside_unknown = false;
      for (int p = loops[j].parent; p >= 0 && static_cast<std::size_t>(p) != *main;
           p = loops[static_cast<std::size_t>(p)].parent) {
        if (!loops[static_cast<std::size_t>(p)].trip_count) inside_unknown = true;
      }
      if (!inside_unknown) m.inner_instructions += static_cast<long>(loops[j].size());
    }
    for (std::size_t k = loops[j].first; k <= loops[j].last; ++k) weight[k - L.first] *= trips;
  }

  for (std::size_t k = L.first; k <= L.last; ++k) {
    const Instruction& in = ins[k];
    const long w = weight[k - L.first];
    m.instructions += w;
    if (w > 1) m.nested_known += w - 1;
    const int lane_bytes = kv_bytes_per_lane(in);
    if (lane_bytes > 0) {
      ++m.kv_loads;
      m.kv_bytes_per_warp += static_cast<long>(lane_bytes) * kLanesPerWarp;
      if (in.base() == "LDGSTS") m.async_copies = true;
    }
    if (is_scale_load(in)) m.scale_loads += static_cast<int>(w);
    if (is_narrow_load(in)) m.narrow_loads += static_cast<int>(w);
    if (in.base() == "BAR") m.barriers += w;
    if (in.base() == "LDGDEPBAR") m.commit_groups += w;
    if (m.wait_depth < 0 && in.opcode == "DEPBAR.LE" && in.operands.size() == 2 &&
        in.operands[0] == "SB0") {
      m.wait_depth = static_cast<int>(immediate(in.operands[1]).value_or(-1));
    }
  }

  if (m.async_copies) {
    const long groups = m.wait_depth >= 0 ? m.wait_depth + 1 : 1;
    const long per_group = m.kv_bytes_per_warp / std::max<long>(1, m.commit_groups);
    m.in_flight_per_warp = groups * per_group;
  } else {
    std::set<int> pending;  // registers the KV loads issued so far write
    for (std::size_t k = L.first; k <= L.last; ++k) {
      const Instruction& in = ins[k];
      bool used = false;
      for (int r : reads(in)) used |= pending.count(r) > 0;
      if (used) break;
      const int lane_bytes = kv_bytes_per_lane(in);
      if (lane_bytes == 0) continue;
      m.in_flight_per_warp += static_cast<long>(lane_bytes) * kLanesPerWarp;
      const std::vector<int> dst = registers_in(in.operands.empty() ? "" : in.operands[0]);
      if (!dst.empty()) {
        for (int r = 0; r < lane_bytes / 4; ++r) pending.insert(dst[0] + r);
      }
    }
  }
  return m;
}

void add_format_bytes(MainLoop& m, DType kv, int head_dim) {
  m.scale_bytes_per_warp = 0;
  if (!is_int_kv(kv) || head_dim <= 0) return;
  const double codes = 2.0 * static_cast<double>(kv_row_bytes(kv, head_dim));  // K and V rows
  const double all =
      quant::bytes_per_token_head(kv, quant::KvTensor::k, head_dim, kFormatBlockSize) +
      quant::bytes_per_token_head(kv, quant::KvTensor::v, head_dim, kFormatBlockSize);
  m.scale_bytes_per_warp =
      std::lround(static_cast<double>(m.kv_bytes_per_warp) * (all - codes) / codes);
}

FunctionTotals function_totals(const Function& f) {
  FunctionTotals t;
  std::size_t end = f.instructions.size();
  for (std::size_t i = f.instructions.size(); i-- > 0;) {
    if (f.instructions[i].base() == "EXIT") {
      end = i + 1;
      break;
    }
  }
  for (std::size_t i = 0; i < end; ++i) {
    ++t.instructions;
    if (f.instructions[i].base() == "BAR") ++t.barriers;
  }
  for (const Loop& l : find_loops(f)) t.loops += l.last < end ? 1 : 0;
  return t;
}

KernelName parse_kernel_name(const std::string& demangled) {
  KernelName k;
  k.demangled = demangled;
  std::string_view s = demangled;
  if (s.substr(0, 5) == "void ") s.remove_prefix(5);
  const std::size_t open = s.find_first_of("<(");
  const std::string_view qualified = s.substr(0, open);
  std::vector<std::string_view> parts;
  for (std::size_t p = 0; p <= qualified.size();) {
    std::size_t q = qualified.find("::", p);
    if (q == std::string_view::npos) q = qualified.size();
    parts.push_back(qualified.substr(p, q - p));
    p = q + 2;
  }
  k.kernel = std::string(parts.back());
  k.decode = parts.size() >= 5 && parts[0] == "decodebench" && parts[1] == "kernels" &&
             parts[3] == "paged_decode";
  if (k.decode) {
    std::string_view rung = parts.size() >= 6 ? parts[4] : parts.back();
    constexpr std::string_view kSuffix = "_detail";
    if (rung.size() > kSuffix.size() && rung.substr(rung.size() - kSuffix.size()) == kSuffix) {
      rung.remove_suffix(kSuffix.size());
    }
    k.rung = std::string(rung);
  }
  if (open == std::string_view::npos || s[open] != '<') return k;
  int depth = 0;
  std::size_t start = open + 1;
  std::vector<std::string_view> args;
  for (std::size_t i = open; i < s.size(); ++i) {
    if (s[i] == '<' || s[i] == '(') ++depth;
    if (s[i] == '>' || s[i] == ')') --depth;
    if ((s[i] == ',' && depth == 1) || (s[i] == '>' && depth == 0)) {
      std::string_view a = s.substr(start, i - start);
      while (!a.empty() && a.front() == ' ') a.remove_prefix(1);
      args.push_back(a);
      start = i + 1;
      if (s[i] == '>') break;
    }
  }
  constexpr std::string_view kDType = "(decodebench::DType)";
  std::vector<int> ints;
  for (std::string_view a : args) {
    if (a.substr(0, kDType.size()) == kDType) {
      const int v = std::atoi(std::string(a.substr(kDType.size())).c_str());
      if (v >= 0 && v < kNumKvFormats) k.kv_dtype = static_cast<DType>(v);
    } else if (const std::optional<long> v = immediate(a)) {
      ints.push_back(static_cast<int>(*v));
    } else if (a == "true") {
      k.half_blocks = true;
    }
  }
  if (!ints.empty()) k.head_dim = ints[0];
  if (ints.size() > 1) k.group_cap = ints[1];
  return k;
}

double issue_bound_bandwidth(double instructions_per_byte, const DeviceFigures& d) {
  if (instructions_per_byte <= 0) return 0;
  return kWarpInstructionsPerClockPerSm * d.sm_count * d.boost_clock_hz / instructions_per_byte;
}

double littles_law_bytes_per_sm(const DeviceFigures& d, double latency_seconds) {
  return d.sm_count > 0 ? d.bandwidth * latency_seconds / d.sm_count : 0;
}

}  // namespace decodebench::static_model
