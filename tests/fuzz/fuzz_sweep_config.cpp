// parse_sweep_config (what load_sweep_config does with a config file): bad input is an
// InputError; a config that reads writes back (to_json) to one that reads as the same config,
// since a report's "config" is meant to rerun the sweep.
#include <string>

#include "common/errors.h"
#include "fuzz_util.h"
#include "harness/sweep_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace decodebench;
  SweepConfig c;
  try {
    c = parse_sweep_config(fuzz::as_text(data, size), "fuzz.json");
  } catch (const InputError&) {
    return 0;
  }
  (void)expansion_size(c);
  const std::string written = to_json(c).dump();
  try {
    if (!(parse_sweep_config(written, "written") == c)) {
      fuzz::property_failed("to_json does not read back as the same config", written.c_str());
    }
  } catch (const InputError& e) {
    fuzz::property_failed("to_json of an accepted config is rejected", e.what());
  }
  return 0;
}
