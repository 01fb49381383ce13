// parse_datasheets (what load_datasheets does with configs/devices.json): bad input is an
// InputError; every row read has its required peaks positive.
#include "backends/datasheet.h"
#include "common/errors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace decodebench;
  try {
    for (const Datasheet& d : parse_datasheets(fuzz::as_text(data, size), "fuzz.json")) {
      if (!(d.bandwidth > 0) || !(d.fp32_flops > 0) || d.mem_bytes <= 0 || d.sm_count < 0 ||
          d.match.empty()) {
        fuzz::property_failed("a row with a non-positive peak was accepted", d.key.c_str());
      }
    }
  } catch (const InputError&) {
  }
  return 0;
}
