// The trace readers: Mooncake JSONL and the two CSV headers, good and bad lines (each error names
// the line and the field), ordering, the shift to 0, max_requests, the format choice, and the
// real traces (the shared copies when present, the committed slice always).
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/errors.h"
#include "support/host_test_util.h"
#include "trace/shared_traces.h"
#include "trace/trace.h"
#include "workload/workload.h"  // configs_dir

namespace decodebench {
namespace {

using test::expect_input_error;
using test::TempDir;

Trace jsonl(const std::string& text, int block_tokens = 4) {
  return parse_mooncake_jsonl(text, "t.jsonl", block_tokens);
}

Trace csv(const std::string& text) { return parse_csv_trace(text, "t.csv"); }

// ---- Mooncake JSONL -----------------------------------------------------------------------

TEST(MooncakeJsonl, ReadsEveryFieldInSeconds) {
  const Trace t =
      jsonl(R"({"timestamp": 0, "input_length": 9, "output_length": 3, "hash_ids": [0, 1, 2]})"
            "\n"
            R"({"timestamp": 1500, "input_length": 4, "output_length": 1, "hash_ids": [0]})"
            "\n");
  EXPECT_EQ(t.source, "t.jsonl");
  EXPECT_EQ(t.format, TraceFormat::mooncake);
  EXPECT_EQ(t.block_tokens, 4);
  EXPECT_TRUE(t.has_prefix_info);
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_EQ(t.requests[0].arrival_s, 0);
  EXPECT_EQ(t.requests[0].input_tokens, 9);
  EXPECT_EQ(t.requests[0].output_tokens, 3);
  EXPECT_EQ(t.requests[0].hash_ids, (std::vector<std::uint64_t>{0, 1, 2}));
  EXPECT_DOUBLE_EQ(t.requests[1].arrival_s, 1.5);
  EXPECT_EQ(t.requests[1].hash_ids, (std::vector<std::uint64_t>{0}));
}

TEST(MooncakeJsonl, ToleratesBlankLinesCrlfOtherKeysAndNoFinalNewline) {
  const Trace t = jsonl(
      "\r\n"
      R"({"timestamp": 2.5, "input_length": 1, "output_length": 1, "hash_ids": [7], "x": [1]})"
      "\r\n   \n"
      R"({"hash_ids": [18446744073709551615, 3], "output_length": 2, "input_length": 5,)"
      R"( "timestamp": 2.5})");
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_EQ(t.requests[0].hash_ids[0], 7u);
  EXPECT_EQ(t.requests[1].hash_ids[0], 18446744073709551615ull);  // the full uint64 range
  EXPECT_EQ(t.requests[1].input_tokens, 5);
}

TEST(MooncakeJsonl, OrdersByArrivalStablyAndShiftsTheFirstToZero) {
  // File order: 9 s, 7 s (a), 8 s, 7 s (b): ties keep file order.
  const Trace t = jsonl(
      R"({"timestamp": 9000, "input_length": 1, "output_length": 1, "hash_ids": [1]}
{"timestamp": 7000, "input_length": 2, "output_length": 1, "hash_ids": [2]}
{"timestamp": 8000, "input_length": 3, "output_length": 1, "hash_ids": [3]}
{"timestamp": 7000, "input_length": 4, "output_length": 1, "hash_ids": [4]}
)");
  ASSERT_EQ(t.requests.size(), 4u);
  const int inputs[] = {2, 4, 3, 1};
  const double arrivals[] = {0, 0, 1, 2};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(t.requests[i].input_tokens, inputs[i]) << i;
    EXPECT_DOUBLE_EQ(t.requests[i].arrival_s, arrivals[i]) << i;
  }
}

TEST(MooncakeJsonl, BlockCountIsTheCeilingOfInputOverBlockTokens) {
  // 512-token blocks as in the release: 2290 tokens need 5 ids, 512 exactly 1, 513 two.
  const std::string ok =
      R"({"timestamp": 0, "input_length": 2290, "output_length": 1, "hash_ids": [0,1,2,3,4]}
{"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [0]}
{"timestamp": 0, "input_length": 513, "output_length": 1, "hash_ids": [0, 5]})";
  EXPECT_EQ(parse_mooncake_jsonl(ok, "t.jsonl", 512).requests.size(), 3u);
  expect_input_error([&] { parse_mooncake_jsonl(ok, "t.jsonl", 256); },
                     {"t.jsonl:1:", "'hash_ids' has 5 ids", "input_length 2290 needs 9 blocks",
                      "256 tokens", "--trace-block-tokens"});
  expect_input_error([&] { parse_mooncake_jsonl(ok, "t.jsonl", 0); }, {"block tokens", ">= 1"});
}

// A good line, then the bad one: the message must name line 2 (or 3 after a blank line).
struct BadLine {
  std::string line;
  std::vector<std::string> parts;
};

TEST(MooncakeJsonl, BadLinesNameTheLineAndTheField) {
  const std::string good =
      R"({"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [0]})";
  const std::string ids = R"("hash_ids": [0])";
  const BadLine cases[] = {
      {R"({"timestamp": 0, "input_length": 4)", {"not valid JSON"}},
      {"not json", {"not valid JSON"}},
      {R"([0, 4, 1, [0]])", {"an array", "JSON object"}},
      {"42", {"an integer", "JSON object"}},
      {R"({"input_length": 4, "output_length": 1, )" + ids + "}", {"missing 'timestamp'", ">= 0"}},
      {R"({"timestamp": "0", "input_length": 4, "output_length": 1, )" + ids + "}",
       {"'timestamp' is a string", ">= 0"}},
      {R"({"timestamp": true, "input_length": 4, "output_length": 1, )" + ids + "}",
       {"'timestamp' is a boolean"}},
      {R"({"timestamp": -1, "input_length": 4, "output_length": 1, )" + ids + "}",
       {"'timestamp' is -1", ">= 0"}},
      {R"({"timestamp": -0.5, "input_length": 4, "output_length": 1, )" + ids + "}",
       {"'timestamp'", ">= 0"}},
      {R"({"timestamp": 1e999, "input_length": 4, "output_length": 1, )" + ids + "}",
       {"1e999"}},  // nlohmann refuses the overflow itself
      {R"({"timestamp": 0, "output_length": 1, )" + ids + "}", {"missing 'input_length'"}},
      {R"({"timestamp": 0, "input_length": 0, "output_length": 1, "hash_ids": []})",
       {"'input_length' is 0", "[1, 2147483647]"}},
      {R"({"timestamp": 0, "input_length": -4, "output_length": 1, )" + ids + "}",
       {"'input_length' is -4", "[1, 2147483647]"}},
      {R"({"timestamp": 0, "input_length": 2147483648, "output_length": 1, )" + ids + "}",
       {"'input_length' is 2147483648", "[1, 2147483647]"}},
      {R"({"timestamp": 0, "input_length": 4.5, "output_length": 1, )" + ids + "}",
       {"'input_length' is a number", "integer"}},
      {R"({"timestamp": 0, "input_length": "4", "output_length": 1, )" + ids + "}",
       {"'input_length' is a string", "integer"}},
      {R"({"timestamp": 0, "input_length": 4, "output_length": 0, )" + ids + "}",
       {"'output_length' is 0", "[1, 2147483647]"}},
      {R"({"timestamp": 0, "input_length": 4, )" + ids + "}", {"missing 'output_length'"}},
      {R"({"timestamp": 0, "input_length": 4, "output_length": 1})", {"missing 'hash_ids'"}},
      {R"({"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": 0})",
       {"'hash_ids' is an integer", "array"}},
      {R"({"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [0, 1]})",
       {"'hash_ids' has 2 ids", "needs 1 block of 4 tokens", "--trace-block-tokens"}},
      {R"({"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": []})",
       {"'hash_ids' has 0 ids"}},
      {R"({"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [-1]})",
       {"'hash_ids'[0] is an integer", ">= 0"}},
      {R"({"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [0, 1.5]})",
       {"'hash_ids'[1] is a number", ">= 0"}},
      {R"({"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [0, "1"]})",
       {"'hash_ids'[1] is a string"}},
      {std::string(100, '[') + std::string(100, ']'), {"nested deeper"}},
  };
  for (const BadLine& c : cases) {
    SCOPED_TRACE(c.line);
    const std::vector<std::string> at2 = {"t.jsonl:2:"};
    expect_input_error([&] { jsonl(good + "\n" + c.line + "\n" + good); }, at2);
    expect_input_error([&] { jsonl(good + "\n" + c.line + "\n" + good); }, c.parts);
    const std::vector<std::string> at3 = {"t.jsonl:3:"};
    expect_input_error([&] { jsonl(good + "\r\n\r\n" + c.line); }, at3);
  }
}

TEST(MooncakeJsonl, AnEmptyTraceIsAnError) {
  expect_input_error([] { jsonl(""); }, {"t.jsonl", "empty"});
  expect_input_error([] { jsonl("\n \r\n\n"); }, {"t.jsonl", "empty"});
}

// ---- CSV ----------------------------------------------------------------------------------

TEST(CsvTrace, ReadsTheAzureHeaderWithFractionsOfUpToNineDigits) {
  const Trace t =
      csv("TIMESTAMP,ContextTokens,GeneratedTokens\n"
          "2023-11-16 18:15:46.6805900,374,44\n"
          "2023-11-16 18:15:46.680590001,10,1\n"  // 1 ns later
          "2023-11-16 18:15:47,2,3\n"
          "2023-11-16 18:16:47.5,4,5\n"
          "2023-11-17 18:15:46.6805900Z,6,7\n"
          "2023-11-17 18:15:46.6805900+00:00,8,9\n");
  EXPECT_EQ(t.format, TraceFormat::csv);
  EXPECT_FALSE(t.has_prefix_info);
  ASSERT_EQ(t.requests.size(), 6u);
  EXPECT_EQ(t.requests[0].arrival_s, 0);
  EXPECT_EQ(t.requests[0].input_tokens, 374);
  EXPECT_EQ(t.requests[0].output_tokens, 44);
  EXPECT_TRUE(t.requests[0].hash_ids.empty());
  EXPECT_NEAR(t.requests[1].arrival_s, 1e-9, 1e-15);  // nanoseconds survive the epoch offset
  EXPECT_NEAR(t.requests[2].arrival_s, 0.31941, 1e-12);
  EXPECT_NEAR(t.requests[3].arrival_s, 60.81941, 1e-12);
  EXPECT_NEAR(t.requests[4].arrival_s, 86400, 1e-12);
  EXPECT_NEAR(t.requests[5].arrival_s, 86400, 1e-12);
}

TEST(CsvTrace, ReadsTheMillisecondHeader) {
  const Trace t =
      csv("timestamp,input_length,output_length\n"
          "250.5,100,10\n"
          "0250.5,1,1\n"
          "1250,2147483647,3\n");
  ASSERT_EQ(t.requests.size(), 3u);
  EXPECT_EQ(t.requests[0].arrival_s, 0);
  EXPECT_EQ(t.requests[1].arrival_s, 0);
  EXPECT_DOUBLE_EQ(t.requests[2].arrival_s, 0.9995);
  EXPECT_EQ(t.requests[2].input_tokens, 2147483647);
}

TEST(CsvTrace, HeaderCaseBomBlanksAroundFieldsAndCrlfAreTolerated) {
  const Trace t =
      csv("\xEF\xBB\xBF\r\n Timestamp , Input_Length,OUTPUT_LENGTH\r\n"
          "\r\n"
          "3000 , 7 ,\t8\r\n"
          "1000,5,6");
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_EQ(t.requests[0].input_tokens, 5);
  EXPECT_DOUBLE_EQ(t.requests[1].arrival_s, 2);
  EXPECT_EQ(t.requests[1].output_tokens, 8);
}

TEST(CsvTrace, OrdersByArrivalStably) {
  const Trace t =
      csv("TIMESTAMP,ContextTokens,GeneratedTokens\n"
          "2024-01-01 00:00:03,1,1\n"
          "2023-12-31 23:59:59.5,2,1\n"
          "2024-01-01 00:00:01,3,1\n"
          "2023-12-31 23:59:59.5,4,1\n");
  const int inputs[] = {2, 4, 3, 1};
  const double arrivals[] = {0, 0, 1.5, 3.5};
  ASSERT_EQ(t.requests.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(t.requests[i].input_tokens, inputs[i]) << i;
    EXPECT_DOUBLE_EQ(t.requests[i].arrival_s, arrivals[i]) << i;
  }
}

TEST(CsvTrace, BadAzureLinesNameTheLineAndTheColumn) {
  const std::string head = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,1\n";
  const BadLine cases[] = {
      {"2023-11-16 18:15:46,1", {"2 columns", "the header has 3"}},
      {"2023-11-16 18:15:46,1,1,1", {"4 columns", "the header has 3"}},
      {"2023-11-16 18:15:46", {"1 column,", "the header has 3"}},
      {"2023-11-16T18:15:46,1,1", {"'TIMESTAMP'", "YYYY-MM-DD HH:MM:SS"}},
      {"2023-11-16 18:15,1,1", {"'TIMESTAMP'", "YYYY-MM-DD HH:MM:SS"}},
      {"2023-1-16 18:15:46,1,1", {"'TIMESTAMP'"}},
      {"1700158546,1,1", {"'TIMESTAMP'"}},
      {"2023-02-30 00:00:00,1,1", {"'TIMESTAMP'", "'2023-02-30 00:00:00'"}},
      {"2023-13-01 00:00:00,1,1", {"'TIMESTAMP'"}},
      {"2023-11-16 24:00:00,1,1", {"'TIMESTAMP'"}},
      {"2023-11-16 18:15:46.,1,1", {"'TIMESTAMP'"}},
      {"2023-11-16 18:15:46.1234567890,1,1", {"'TIMESTAMP'", "9 digits"}},
      {"2023-11-16 18:15:46.5x,1,1", {"'TIMESTAMP'"}},
      {"2023-11-16 18:15:46+01:00,1,1", {"'TIMESTAMP'", "UTC"}},
      {"2023-11-16 18:15:46,abc,1", {"'ContextTokens' is 'abc'", "[1, 2147483647]"}},
      {"2023-11-16 18:15:46,12x,1", {"'ContextTokens' is '12x'"}},
      {"2023-11-16 18:15:46,1 2,1", {"'ContextTokens' is '1 2'"}},
      {"2023-11-16 18:15:46,,1", {"'ContextTokens' is ''"}},
      {"2023-11-16 18:15:46,0,1", {"'ContextTokens' is '0'"}},
      {"2023-11-16 18:15:46,+5,1", {"'ContextTokens' is '+5'"}},
      {"2023-11-16 18:15:46,2147483648,1", {"'ContextTokens' is '2147483648'"}},
      {"2023-11-16 18:15:46,99999999999999999999999,1", {"'ContextTokens'"}},
      {"2023-11-16 18:15:46,1.0,1", {"'ContextTokens' is '1.0'"}},
      {"2023-11-16 18:15:46,1,0", {"'GeneratedTokens' is '0'"}},
      {"2023-11-16 18:15:46,1,-1", {"'GeneratedTokens' is '-1'"}},
      {"2023-11-16 18:15:46,1,\"1\"", {"'GeneratedTokens'"}},
  };
  for (const BadLine& c : cases) {
    SCOPED_TRACE(c.line);
    const std::vector<std::string> at3 = {"t.csv:3:"};
    expect_input_error([&] { csv(head + c.line + "\n"); }, at3);
    expect_input_error([&] { csv(head + c.line + "\n"); }, c.parts);
  }
}

TEST(CsvTrace, BadMillisecondLinesNameTheLineAndTheColumn) {
  const std::string head = "timestamp,input_length,output_length\r\n0,1,1\r\n\r\n";
  const BadLine cases[] = {
      {"-1,1,1", {"'timestamp' is '-1'", "milliseconds", ">= 0"}},
      {"inf,1,1", {"'timestamp' is 'inf'", ">= 0"}},
      {"nan,1,1", {"'timestamp' is 'nan'"}},
      {"1e999,1,1", {"'timestamp' is '1e999'"}},
      {"5ms,1,1", {"'timestamp' is '5ms'"}},
      {"2023-11-16 18:15:46,1,1", {"'timestamp'"}},
      {"5,x,1", {"'input_length' is 'x'"}},
      {"5,1,4294967297", {"'output_length' is '4294967297'"}},
      {"5,1", {"2 columns", "timestamp, input_length, output_length"}},
  };
  for (const BadLine& c : cases) {
    SCOPED_TRACE(c.line);
    const std::vector<std::string> at4 = {"t.csv:4:"};
    expect_input_error([&] { csv(head + c.line + "\r\n"); }, at4);
    expect_input_error([&] { csv(head + c.line + "\r\n"); }, c.parts);
  }
}

TEST(CsvTrace, HeaderIsRequiredAndMustBeKnown) {
  expect_input_error([] { csv("2023-11-16 18:15:46,1,1\n"); },
                     {"t.csv:1:", "header", "TIMESTAMP,ContextTokens,GeneratedTokens",
                      "timestamp,input_length,output_length"});
  expect_input_error([] { csv("TIMESTAMP,ContextTokens\n"); }, {"t.csv:1:", "header"});
  expect_input_error([] { csv("TIMESTAMP,ContextTokens,GeneratedTokens,Extra\n"); },
                     {"t.csv:1:", "header"});
  expect_input_error([] { csv("timestamp,ContextTokens,output_length\n"); },
                     {"t.csv:1:", "header"});
}

TEST(CsvTrace, AnEmptyTraceIsAnError) {
  expect_input_error([] { csv(""); }, {"t.csv", "empty", "TIMESTAMP,ContextTokens"});
  expect_input_error([] { csv("\r\n\n"); }, {"t.csv", "empty"});
  expect_input_error([] { csv("TIMESTAMP,ContextTokens,GeneratedTokens\n"); },
                     {"t.csv", "empty", "no requests"});
  expect_input_error([] { csv("timestamp,input_length,output_length\n\n"); }, {"t.csv", "empty"});
}

// ---- load_trace -------------------------------------------------------------------------

constexpr const char* kJsonl =
    R"({"timestamp": 3000, "input_length": 3, "output_length": 1, "hash_ids": [0, 1, 2]}
{"timestamp": 1000, "input_length": 1, "output_length": 1, "hash_ids": [0]}
{"timestamp": 2000, "input_length": 2, "output_length": 1, "hash_ids": [0, 1]}
)";
constexpr const char* kCsv = "timestamp,input_length,output_length\n3000,3,1\n1000,1,1\n2000,2,1\n";

TEST(LoadTrace, AutoPicksTheFormatByExtension) {
  const TempDir dir;
  const auto j = dir.write("a.jsonl", kJsonl);
  const auto c = dir.write("a.csv", kCsv);
  const Trace tj = load_trace(j, "auto", 1);
  EXPECT_EQ(tj.format, TraceFormat::mooncake);
  EXPECT_EQ(tj.source, j.string());
  EXPECT_EQ(tj.block_tokens, 1);
  EXPECT_TRUE(tj.has_prefix_info);
  ASSERT_EQ(tj.requests.size(), 3u);
  EXPECT_EQ(tj.requests[2].hash_ids.size(), 3u);
  const Trace tc = load_trace(c, "auto", 16);
  EXPECT_EQ(tc.format, TraceFormat::csv);
  EXPECT_EQ(tc.block_tokens, 16);
  EXPECT_FALSE(tc.has_prefix_info);
  ASSERT_EQ(tc.requests.size(), 3u);
  EXPECT_EQ(tc.requests[0].input_tokens, 1);
  EXPECT_DOUBLE_EQ(tc.requests[2].arrival_s, 2);
  EXPECT_EQ(load_trace(dir.write("b.CSV", kCsv), "auto", 16).format, TraceFormat::csv);
}

TEST(LoadTrace, AnExplicitFormatOverridesTheExtension) {
  const TempDir dir;
  const auto j = dir.write("trace.txt", kJsonl);
  EXPECT_EQ(load_trace(j, "mooncake", 1).requests.size(), 3u);
  expect_input_error([&] { load_trace(j, "csv", 1); }, {"trace.txt:1:", "header"});
  expect_input_error([&] { load_trace(j, "auto", 1); },
                     {"trace.txt", "extension", "mooncake or csv"});
  expect_input_error([&] { load_trace(dir.write("noext", kJsonl), "auto", 1); }, {"extension"});
}

TEST(LoadTrace, UnknownFormatListsTheValidOnes) {
  const TempDir dir;
  const auto j = dir.write("a.jsonl", kJsonl);
  for (const char* bad : {"json", "Mooncake", "", "azure"}) {
    expect_input_error([&] { load_trace(j, bad, 1); },
                       {std::string("'") + bad + "'", "auto, mooncake, csv"});
  }
}

TEST(LoadTrace, MaxRequestsKeepsTheFirstByArrival) {
  const TempDir dir;
  const auto j = dir.write("a.jsonl", kJsonl);
  const Trace two = load_trace(j, "auto", 1, 2);
  ASSERT_EQ(two.requests.size(), 2u);
  EXPECT_EQ(two.requests[0].input_tokens, 1);  // 1000 ms, the earliest, though on line 2
  EXPECT_EQ(two.requests[1].input_tokens, 2);
  EXPECT_DOUBLE_EQ(two.requests[1].arrival_s, 1);
  EXPECT_EQ(load_trace(j, "auto", 1, 3).requests.size(), 3u);
  EXPECT_EQ(load_trace(j, "auto", 1, 1000).requests.size(), 3u);
  EXPECT_EQ(load_trace(j, "auto", 1, 0).requests.size(), 3u);  // 0: all
  EXPECT_EQ(load_trace(dir.write("a.csv", kCsv), "auto", 1, 1).requests.at(0).input_tokens, 1);
  expect_input_error([&] { load_trace(j, "auto", 1, -1); }, {"max requests", "-1"});
}

TEST(LoadTrace, BadArgumentsAndMissingFiles) {
  const TempDir dir;
  const auto j = dir.write("a.jsonl", kJsonl);
  expect_input_error([&] { load_trace(j, "auto", 0); }, {"block tokens", ">= 1", "0"});
  expect_input_error([&] { load_trace(j, "auto", -512); }, {"block tokens", "-512"});
  expect_input_error([&] { load_trace(dir.path() / "missing.jsonl", "auto", 512); },
                     {"missing.jsonl", "does not exist"});
  expect_input_error([&] { load_trace(dir.path(), "mooncake", 512); }, {"not a file"});
  expect_input_error([&] { load_trace(dir.write("empty.jsonl", ""), "auto", 512); },
                     {"empty.jsonl", "empty"});
  // The block size reaches the parser: 3 tokens at 2 per block need 2 ids, line 1 has 3.
  expect_input_error([&] { load_trace(j, "auto", 2); }, {"a.jsonl:1:", "'hash_ids' has 3 ids"});
}

TEST(TraceFormatName, NamesEachFormat) {
  EXPECT_EQ(trace_format_name(TraceFormat::mooncake), "mooncake");
  EXPECT_EQ(trace_format_name(TraceFormat::csv), "csv");
}

// ---- the real traces --------------------------------------------------------------------

// Every request well formed for the cache: ids cover the prompt, arrivals from 0, in order.
void expect_consistent(const Trace& t) {
  ASSERT_FALSE(t.requests.empty());
  EXPECT_EQ(t.requests.front().arrival_s, 0);
  std::size_t bad_ids = 0, out_of_order = 0;
  for (std::size_t i = 0; i < t.requests.size(); ++i) {
    const TraceRequest& r = t.requests[i];
    const auto blocks =
        static_cast<std::size_t>((r.input_tokens + t.block_tokens - 1) / t.block_tokens);
    if (t.has_prefix_info && r.hash_ids.size() != blocks) ++bad_ids;
    if (i > 0 && r.arrival_s < t.requests[i - 1].arrival_s) ++out_of_order;
  }
  EXPECT_EQ(bad_ids, 0u);
  EXPECT_EQ(out_of_order, 0u);
}

using testing::shared_traces_dir;

TEST(SharedTraces, BothLoadWithEveryBlockCountRight) {
  const auto dir = shared_traces_dir();
  if (!std::filesystem::is_directory(dir)) {
    GTEST_SKIP() << "no shared traces at " << dir.string()
                 << " (set DECODEBENCH_SHARED_TRACES_DIR to their directory)";
  }
  const Trace conv = load_trace(dir / "conversation_trace.jsonl", "auto", 512);
  EXPECT_EQ(conv.requests.size(), 12031u);
  expect_consistent(conv);
  const Trace syn = load_trace(dir / "synthetic_trace.jsonl", "auto", 512);
  EXPECT_EQ(syn.requests.size(), 3993u);
  expect_consistent(syn);
  // The committed slice is this trace's first 2,000 requests.
  const Trace slice = load_trace(dir / "conversation_trace.jsonl", "auto", 512, 2000);
  EXPECT_DOUBLE_EQ(slice.requests.back().arrival_s, 669);
}

TEST(CommittedTraces, TheConversationSliceHasItsCount) {
  const auto file = configs_dir() / "traces" / "mooncake-conversation-2k.jsonl";
  const Trace t = load_trace(file, "auto", 512);
  EXPECT_EQ(t.requests.size(), 2000u);
  EXPECT_DOUBLE_EQ(t.requests.back().arrival_s, 669);  // as configs/traces/README.md says
  EXPECT_EQ(t.requests.front().input_tokens, 6758);
  expect_consistent(t);
}

TEST(CommittedTraces, TheAzureFormatExampleReads) {
  const Trace t = load_trace(configs_dir() / "traces" / "example-azure-format.csv", "auto", 512);
  EXPECT_EQ(t.format, TraceFormat::csv);
  ASSERT_EQ(t.requests.size(), 20u);
  EXPECT_NEAR(t.requests.back().arrival_s, 33.31855, 1e-9);
  expect_consistent(t);
}

}  // namespace
}  // namespace decodebench
