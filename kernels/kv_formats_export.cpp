// Writes the KV formats' table (kv_formats.h) as JSON on stdout: what CMake and the scripts read
// instead of repeating a format's facts. cmake/kv_formats.cmake compiles and runs this at
// configure time and keeps the output as <build>/kv_formats.json ("decodebench-kv-formats",
// version 1; docs/design.md "Adding a KV format"). Plain C++17 and <cstdio> only, so it builds
// with nothing else configured.
#include <cstdio>

#include "kv_formats.h"

namespace {

using namespace decodebench;

void print_aliases(const char* aliases) {
  std::printf("[");
  bool open = false;
  for (const char* c = aliases; *c != '\0'; ++c) {
    if (*c == ',') {
      std::printf("\"");
      open = false;
      continue;
    }
    if (!open) {
      std::printf(c == aliases ? "\"" : ", \"");
      open = true;
    }
    std::printf("%c", *c);
  }
  std::printf(open ? "\"]" : "]");
}

void print_tensor(const KvFormatInfo& f, bool key) {
  const KvTensorLayout& l = key ? f.k : f.v;
  const KvBytesModel m = kv_bytes_model(f.dtype, key);
  std::printf(
      "{\"scale_axis\": \"%s\", \"zeros\": %s, \"group_channels\": %d, "
      "\"bytes_per_token_head\": {\"per_d\": %.17g, \"per_d_over_block\": %.17g, "
      "\"per_row\": %.17g}}",
      kv_scale_axis_name(l.axis), l.zeros ? "true" : "false", l.group_channels, m.per_d,
      m.per_d_over_block, m.per_row);
}

}  // namespace

int main() {
  std::printf("{\n  \"kind\": \"decodebench-kv-formats\",\n  \"version\": 1,\n");
  std::printf("  \"source\": \"kernels/kv_formats.h\",\n");
  std::printf(
      "  \"bytes_per_token_head\": \"per_d * head_dim + per_d_over_block * head_dim / "
      "block_size + per_row\",\n");
  std::printf("  \"scale_bytes\": %d,\n  \"tensor_scale_bytes\": %d,\n", kKvScaleBytes,
              kKvTensorScaleBytes);
  std::printf("  \"formats\": [\n");
  for (int i = 0; i < kNumKvFormats; ++i) {
    const KvFormatInfo& f = kKvFormats[i];
    std::printf("    {\"name\": \"%s\", \"ordinal\": %d, \"aliases\": ", f.name,
                static_cast<int>(f.dtype));
    print_aliases(f.aliases);
    std::printf(", \"float\": %s, \"code_bits\": %d, \"signed_codes\": %s, \"ladder\": \"%s\",\n",
                f.is_float ? "true" : "false", f.code_bits, f.signed_codes ? "true" : "false",
                ladder_use_name(f.ladder));
    std::printf("     \"k\": ");
    print_tensor(f, true);
    std::printf(",\n     \"v\": ");
    print_tensor(f, false);
    std::printf("}%s\n", i + 1 < kNumKvFormats ? "," : "");
  }
  std::printf("  ]\n}\n");
  return 0;
}
