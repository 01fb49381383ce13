// parse_npy (what read_npy does with a file's bytes): bad input is an InputError, a claimed
// shape never allocates more than the bytes present.
#include "common/errors.h"
#include "common/npy.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace decodebench;
  try {
    const NpyArray a = parse_npy(fuzz::as_text(data, size), "fuzz.npy");
    if (a.data.size() > size) fuzz::property_failed("data larger than the file", a.descr.c_str());
    if (a.descr == "<f4") (void)a.as_float();
    if (a.descr == "<i4") (void)a.as_int32();
  } catch (const InputError&) {
  }
  return 0;
}
