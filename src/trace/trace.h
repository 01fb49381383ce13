// Request traces: what arrives when, how long its prompt and answer are, and (where the format
// has it) which KV blocks of its prompt it shares with earlier requests. Read by `cache-sim` and
// `replay` (docs/design.md "Trace replay").
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace decodebench {

struct TraceRequest {
  double arrival_s = 0;   // seconds from the trace's first request
  int input_tokens = 0;   // prompt tokens, >= 1
  int output_tokens = 0;  // generated tokens, >= 1
  // The prompt's KV blocks of Trace::block_tokens tokens, as content hashes: equal ids are equal
  // content *and* equal prefix (an id names a block given everything before it), so a leading
  // run of ids found in a cache is a reusable prefix. The last id covers the final, possibly
  // partial, block: size() == ceil(input_tokens / block_tokens). Empty when the trace has no
  // prefix information (csv).
  std::vector<std::uint64_t> hash_ids;
};

enum class TraceFormat { mooncake, csv };
std::string_view trace_format_name(TraceFormat f);

struct Trace {
  std::string source;  // the file, for reports and error messages
  TraceFormat format = TraceFormat::mooncake;
  int block_tokens = 512;              // tokens per hash id (--trace-block-tokens)
  bool has_prefix_info = false;        // hash_ids given (mooncake), else every request is a miss
  std::vector<TraceRequest> requests;  // by arrival, ties in file order
};

// Mooncake's JSONL (FAST'25 release): one object per line with `timestamp` (ms from the start,
// a number >= 0), `input_length` and `output_length` (integers >= 1) and `hash_ids` (an array of
// integers >= 0 of length ceil(input_length / block_tokens)); other keys are ignored, blank lines
// skipped. Any bad line throws InputError naming the source, the 1-based line and the field
// ("trace.jsonl:12: 'hash_ids' has 3 ids, input_length 2290 needs 5 blocks of 512 tokens; is
// --trace-block-tokens right?"). Requests are ordered by arrival (stable); arrivals are shifted
// so the first one is at 0.
Trace parse_mooncake_jsonl(std::string_view text, const std::string& source, int block_tokens);

// A CSV without prefix information, header required:
//   TIMESTAMP,ContextTokens,GeneratedTokens   (the Azure LLM inference trace: timestamps are
//       "YYYY-MM-DD HH:MM:SS[.fraction]" UTC)
//   timestamp,input_length,output_length      (timestamps in ms, Mooncake's field names)
// Bad lines throw InputError naming the line and the column. Ordered and shifted as above.
Trace parse_csv_trace(std::string_view text, const std::string& source);

// Reads `path`. format "auto" picks by extension (.jsonl: mooncake, .csv: csv), else
// "mooncake" or "csv"; anything else throws InputError listing the valid values. block_tokens
// must be >= 1 (InputError). max_requests > 0 keeps only the first that many (by arrival).
Trace load_trace(const std::filesystem::path& path, std::string_view format, int block_tokens,
                 std::int64_t max_requests = 0);

}  // namespace decodebench
