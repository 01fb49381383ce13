// The text cuobjdump prints, parsed: `cuobjdump -sass` into functions of instructions, and
// `cuobjdump --dump-resource-usage` into registers and memory per function. The static model
// (static_model.h) reads its figures from these; nothing here knows about decode kernels.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace decodebench::static_model {

// One SASS instruction, e.g. `@!P4 LDGSTS.E.BYPASS.128 [R15+0x2000], desc[UR10][R4.64], !P4`.
struct Instruction {
  std::uint32_t address = 0;            // byte offset in the function (/*21f0*/)
  std::string guard;                    // "@!P4"; empty when the instruction is unpredicated
  std::string opcode;                   // with its modifiers: "LDGSTS.E.BYPASS.128"
  std::vector<std::string> operands;    // as printed, top-level commas split
  std::optional<std::uint32_t> target;  // BRA with an address operand: where it jumps
  int line = 0;                         // 1-based line of the parsed text, for messages

  // The opcode without modifiers: "LDGSTS".
  std::string_view base() const;
  // Whether the opcode carries modifier `m` ("128" in LDG.E.128.CONSTANT).
  bool has_modifier(std::string_view m) const;
};

// One function (kernel or device function) of one cubin.
struct Function {
  std::string name;                       // mangled, as cuobjdump prints it
  std::string arch;                       // "sm_90a"
  std::vector<Instruction> instructions;  // in address order
};

// Parses `cuobjdump -sass` output. A function that appears in several objects of a library (an
// instance two translation units share) is kept once per architecture. Throws InputError naming
// `source` and the line for text that is not cuobjdump's: an instruction outside a function, an
// instruction line without its `;`, addresses that do not increase, a branch whose target is not
// an address, a function without instructions, or no function at all.
std::vector<Function> parse_sass(std::string_view text, const std::string& source);

// One function's row of `cuobjdump --dump-resource-usage`.
struct ResourceUsage {
  std::string name;  // mangled
  std::string arch;
  int registers = 0;
  int stack = 0;   // bytes
  int shared = 0;  // bytes: static shared memory plus, on sm_80 and later, the 1 KiB reserve
  int local = 0;   // bytes
};

// Parses `cuobjdump --dump-resource-usage` output (the cubin sections; PTX sections carry none).
// Throws InputError naming `source` and the line when a Function line has no REG: line.
std::vector<ResourceUsage> parse_resource_usage(std::string_view text, const std::string& source);

// The demangled name (abi::__cxa_demangle), or `mangled` itself when it is not a C++ name.
std::string demangle(const std::string& mangled);

}  // namespace decodebench::static_model
