// The trace readers (what load_trace does with a file's text): the first byte picks the reader,
// 'c' the CSV one, else Mooncake JSONL with 2^d tokens per block for a digit d (512 otherwise);
// the rest is the file. Bad input is an InputError; a trace that reads is what cache-sim and
// replay rely on: requests by arrival from 0, token counts in range, one hash id per block.
#include <cmath>
#include <string>

#include "common/errors.h"
#include "fuzz_util.h"
#include "trace/trace.h"

namespace {

void check(const decodebench::Trace& t, bool csv, int block_tokens) {
  using decodebench::fuzz::property_failed;
  if (t.requests.empty()) property_failed("an empty trace was accepted", t.source.c_str());
  if (t.has_prefix_info == csv) property_failed("prefix info does not match the format", "");
  if (t.requests.front().arrival_s != 0) property_failed("the first arrival is not 0", "");
  double last = 0;
  for (const decodebench::TraceRequest& r : t.requests) {
    if (!std::isfinite(r.arrival_s) || r.arrival_s < last) {
      property_failed("arrivals are not finite and in order", std::to_string(r.arrival_s).c_str());
    }
    last = r.arrival_s;
    if (r.input_tokens < 1 || r.output_tokens < 1) {
      const std::string counts =
          std::to_string(r.input_tokens) + " in, " + std::to_string(r.output_tokens) + " out";
      property_failed("a token count below 1 was accepted", counts.c_str());
    }
    const auto blocks = static_cast<std::size_t>(
        (static_cast<long long>(r.input_tokens) + block_tokens - 1) / block_tokens);
    if (r.hash_ids.size() != (csv ? 0 : blocks)) {
      property_failed("hash ids do not cover the prompt",
                      std::to_string(r.hash_ids.size()).c_str());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace decodebench;
  if (size == 0) return 0;
  const bool csv = data[0] == 'c';
  const int block_tokens = data[0] >= '0' && data[0] <= '9' ? 1 << (data[0] - '0') : 512;
  const std::string_view text = fuzz::as_text(data + 1, size - 1);
  try {
    const Trace t = csv ? parse_csv_trace(text, "fuzz.csv")
                        : parse_mooncake_jsonl(text, "fuzz.jsonl", block_tokens);
    check(t, csv, block_tokens);
  } catch (const InputError&) {
  }
  return 0;
}
