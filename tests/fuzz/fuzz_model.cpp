// parse_model_json (what load_model does with a model file): bad input is an InputError; a
// shape that reads is usable (positive, grouped-query divisible).
#include "common/errors.h"
#include "fuzz_util.h"
#include "workload/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace decodebench;
  try {
    const ModelShape m = parse_model_json(fuzz::as_text(data, size), "fuzz.json");
    if (m.num_q_heads <= 0 || m.num_kv_heads <= 0 || m.head_dim <= 0 || m.num_layers <= 0 ||
        m.num_q_heads % m.num_kv_heads != 0) {
      fuzz::property_failed("an unusable shape was accepted", m.name.c_str());
    }
  } catch (const InputError&) {
  }
  return 0;
}
