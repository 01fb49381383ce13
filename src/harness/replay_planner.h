// The replay planner: what a replay's modeled schedule runs on, decided before anything is
// measured (docs/design.md "Trace replay"). The scope of the sampled steps, the device whose
// memory sets the default KV pool, and the rates of the modeled prefill and decode with the basis
// of each, so that `replay` (src/cli/cmd_replay.cpp) only parses options and prints.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "backends/backend.h"
#include "backends/datasheet.h"
#include "harness/replay.h"

namespace decodebench {

// "auto": the whole layer step where the backend has it for this model, else the attention with
// the reason in `note`; "attention" or "layer" as given.
struct ReplayScopeChoice {
  Scope scope = Scope::attention;
  std::string note;  // empty unless "auto" fell back to the attention
};
ReplayScopeChoice choose_replay_scope(Backend& backend, const ModelShape& model, DType weights,
                                      DType q_dtype, int block_size, std::string_view scope);

// The schedule's device and rates as asked: `schedule_device` "this" (the backend's device, its
// measured read ceiling and GEMM roof) or a configs/devices.json key (its datasheet); a rate > 0
// is used as given, 0 is modeled.
struct ReplayDeviceRequest {
  std::string schedule_device = "this";
  double prefill_tokens_per_s = 0;
  double decode_read_bytes_per_s = 0;
  bool kv_pool_given = false;  // the default pool (memory minus weights) is needed only without
  // Ceilings measured earlier on this device (--ceilings FILE); absent: measured here.
  std::optional<Ceilings> ceilings;
};

// The modeled device before anything is measured; refuses what could not be modeled: an empty
// default pool where none is given, a prefill rate to model for a model without a parameter count.
struct ReplayDevice {
  DeviceInfo device;               // the backend's; its ceilings once set_replay_rates ran
  std::optional<Datasheet> sheet;  // the schedule's datasheet row, if one was named
  std::int64_t default_pool_bytes = 0;
  std::int64_t params = 0;  // the model's parameter count (0: unknown)
};
ReplayDevice plan_replay_device(Backend& backend, const ModelShape& model, DType weights,
                                const ReplayDeviceRequest& request);

// Measures the backend's ceilings (and its GEMM roof where the prefill rate is modeled on this
// device) and sets plan.schedule's prefill and decode-read rates, plan.schedule_device and the
// basis of each rate. Throws RuntimeFailure where a rate comes out zero.
void set_replay_rates(Backend& backend, ReplayDevice& d, DType weights,
                      const ReplayDeviceRequest& request, ReplayPlan& plan);

}  // namespace decodebench
