// `decodebench kernels --static`: the static model of every decode kernel instance of a binary,
// as a text table, Markdown (the full table, and README.md's summary) or JSON. The launch shape
// and the occupancy come in through hooks, so this library needs neither the kernels nor CUDA.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "static_model/sass_parse.h"
#include "static_model/static_model.h"

namespace decodebench::static_model {

// What a launcher launches an instance with.
struct LaunchShape {
  int threads = 0;               // per thread block
  std::size_t dynamic_smem = 0;  // bytes
};

struct OccupancyFigure {
  int ctas_per_sm = 0;     // 0: unknown or none fits (error says which)
  std::string limited_by;  // "registers", "shared memory", ...
  std::string error;
};

struct Hooks {
  // The launch shape of an instance; nullopt when no launcher is known for it.
  std::function<std::optional<LaunchShape>(const KernelName&)> launch_shape;
  // Thread blocks per SM from registers, the kernel's own static shared memory and the launch.
  std::function<OccupancyFigure(int registers, std::size_t static_smem, const LaunchShape&)>
      occupancy;
};

// cuobjdump's SHARED on sm_80 and later includes the 1 KiB per block the system reserves; the
// occupancy calculator adds that reserve itself, so the kernel's own static shared memory is
// the rest.
inline constexpr int kReservedSmemPerBlock = 1024;

struct Instance {
  KernelName name;
  std::string arch;
  std::optional<ResourceUsage> resources;
  std::optional<LaunchShape> launch;
  OccupancyFigure occupancy;
  MainLoop loop;
  FunctionTotals totals;

  int static_smem() const;  // the kernel's own, without the reserve
  int warps() const { return launch ? launch->threads / kLanesPerWarp : 0; }
  long in_flight_per_cta() const { return loop.in_flight_per_warp * warps(); }
  long in_flight_per_sm() const { return in_flight_per_cta() * occupancy.ctas_per_sm; }
};

struct ModelSettings {
  std::vector<DeviceFigures> devices;  // one issue-bound column each, in this order
  double latency_seconds = kAssumedDramLatencySeconds;
};

// The decode kernels (namespace ...::paged_decode) of `functions` compiled for sm_90 (the model
// is Hopper's), each with its resources, launch shape, occupancy and main loop, ordered by rung
// (`rung_order`, unknown rungs after), KV dtype, head_dim, group cap, KV-loop kernels first.
std::vector<Instance> analyze_instances(const std::vector<Function>& functions,
                                        const std::vector<ResourceUsage>& resources,
                                        const Hooks& hooks,
                                        const std::vector<std::string>& rung_order);

std::string static_table(const std::vector<Instance>& instances, const ModelSettings& s);
std::string static_markdown(const std::vector<Instance>& instances, const ModelSettings& s);
nlohmann::json static_json(const std::vector<Instance>& instances, const ModelSettings& s);

// The JSON document (`kernels --static --format json` or `--out`) read back, strictly (every key
// known, every figure the writer derives recomputed and compared), for `decodebench report`.
// Throws InputError naming `source` and the key.
struct StaticDocument {
  std::vector<Instance> instances;
  ModelSettings settings;
  std::string binary, cuobjdump;  // what was read, by which tool ("" when not said)
};
bool is_static_document(const nlohmann::json& j);
StaticDocument static_from_json(const nlohmann::json& j, const std::string& source);

// README.md's summary: head_dim 128, one row per (rung, group cap) of the KV-loop kernels, the
// cells "f16 / fp8_e4m3"; issue bound and Little's law on the device `summary_device` (a key of
// s.devices). Missing instances read "n/a".
inline constexpr int kSummaryHeadDim = 128;
std::string static_summary_markdown(const std::vector<Instance>& instances, const ModelSettings& s,
                                    const std::string& summary_device);
// The instances the summary shows that `instances` lacks, as "pipelined fp8_e4m3 cap 4"; empty
// when it has them all. `rungs` is the ladder, in order.
std::vector<std::string> summary_missing(const std::vector<Instance>& instances,
                                         const std::vector<std::string>& rungs);

}  // namespace decodebench::static_model
