// Datasheet peaks of known GPUs (configs/devices.json): the vendor's memory bandwidth, fp32
// (non-tensor) FLOP rate, dense tensor-core FLOP rates and memory size, and where known the SM
// count, boost clock and compute capability. Reports carry them next to the measured ceilings so
// a roofline fraction can be read against either (docs/design.md "Ceilings").
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace decodebench {

struct Datasheet {
  std::string key;   // "h100-sxm", "h200", ... (what `decodebench model --device` takes)
  std::string name;  // marketing name, "NVIDIA H200 SXM 141GB"
  std::vector<std::string> match;  // case-insensitive substrings of cudaDeviceProp.name
  double bandwidth = 0;            // B/s
  double fp32_flops = 0;           // FLOP/s, non-tensor fp32
  // Dense (no 2:4 sparsity) tensor-core peaks, FLOP/s. f16 (the same figure for bf16, fp32
  // accumulate) is required: it is the roof of the tensor-core rungs. fp8 is for the record and
  // 0 where the device has no fp8 tensor cores (A100).
  double tensor_f16_flops = 0;
  double tensor_fp8_flops = 0;
  std::int64_t mem_bytes = 0;  // bytes (GB = 1e9)
  // Optional (0 / empty when the file leaves them out), for the static model's issue bound:
  int sm_count = 0;                // streaming multiprocessors
  double boost_clock_hz = 0;       // the SM clock the vendor quotes its peaks at
  std::string compute_capability;  // "9.0"
};

// A link the KV cache crosses between memory tiers (configs/devices.json "links"): its datasheet
// rate each way. No datasheet gives a per-transfer overhead; where one is needed it is measured
// or given.
struct LinkDatasheet {
  std::string key;       // "pcie-gen5-x16", "nvlink-c2c", "rdma-400g", ...
  std::string name;      // "PCIe 5.0 x16"
  double to_device = 0;  // B/s, host memory (or a remote node) -> GPU
  double to_host = 0;    // B/s, the reverse
  std::string source;    // where the figure comes from
};

// configs_dir() / "devices.json".
std::filesystem::path datasheet_file();

// Every row of the file, in file order. Throws InputError naming the file and the key for a
// malformed file (unknown keys are rejected, like every config here).
std::vector<Datasheet> all_datasheets();
std::vector<Datasheet> load_datasheets(const std::filesystem::path& file);
// The same from the file's text; `file` is what error messages start with.
std::vector<Datasheet> parse_datasheets(std::string_view text, const std::filesystem::path& file);

// The row whose `match` substring is the longest one found in `device_name` (so "H200 NVL" wins
// over "H200"); nullopt when no row matches. Case-insensitive. A substring that ends in a digit
// is found only where the name does not go on with a digit: a model number is whole, so "H20"
// is not found in "NVIDIA H200", nor "L4" in "NVIDIA L40S".
std::optional<Datasheet> find_datasheet(std::string_view device_name);

// The row with this key (case-insensitive); InputError listing the valid keys otherwise.
Datasheet datasheet_by_key(std::string_view key);

// The file's links, in file order (none when it has no "links"); InputError as above.
std::vector<LinkDatasheet> all_link_datasheets();
std::vector<LinkDatasheet> parse_link_datasheets(std::string_view text,
                                                 const std::filesystem::path& file);
// The link with this key (case-insensitive); InputError listing the valid keys otherwise.
LinkDatasheet link_by_key(std::string_view key);

}  // namespace decodebench
