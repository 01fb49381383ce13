// parse_case (what quant-error's load_cases does with one dump directory): the fuzzer's bytes are
// the directory's six files, meta.json then q, k_cache, v_cache, block_tables and context_lens
// (.npy), separated by kSeparator. Bad input is an InputError; a case that reads is what the
// measures rely on: every count >= 1 and agreeing with the arrays, every value finite, every
// table entry a sequence reads inside the pool, and int8's measures are numbers (a NaN once
// scored as a perfect format).
#include <cmath>
#include <string>
#include <string_view>

#include "common/errors.h"
#include "fuzz_util.h"
#include "quant/quant_error.h"

namespace {

constexpr std::string_view kSeparator = "\n--next-file--\n";

void check(const decodebench::quant::AttentionCase& c) {
  using decodebench::fuzz::property_failed;
  const auto& s = c.shape;
  if (s.num_blocks < 1 || s.kv_heads < 1 || s.block_size < 1 || s.head_dim < 1 ||
      c.num_q_heads < 1 || c.batch() < 1 || c.max_blocks_per_seq < 1) {
    property_failed("an empty count was accepted", c.name.c_str());
  }
  if (c.num_q_heads % s.kv_heads != 0) property_failed("Hq is not a multiple of Hkv", "");
  if (static_cast<std::int64_t>(c.k.size()) != s.elements() || c.v.size() != c.k.size() ||
      static_cast<std::int64_t>(c.q.size()) != c.batch() * c.num_q_heads * s.head_dim ||
      static_cast<std::int64_t>(c.block_tables.size()) != c.batch() * c.max_blocks_per_seq) {
    property_failed("array sizes disagree with the shape", "");
  }
  for (const auto* values : {&c.q, &c.k, &c.v}) {
    for (float x : *values) {
      if (!std::isfinite(x)) property_failed("a non-finite value was accepted", "");
    }
  }
  if (!(std::isfinite(c.softmax_scale) && c.softmax_scale > 0)) {
    property_failed("a softmax scale that is not finite and > 0 was accepted", "");
  }
  std::int64_t work = 0;
  for (std::int64_t b = 0; b < c.batch(); ++b) {
    const std::int64_t len = c.context_lens[b];
    if (len < 1 || len > c.max_blocks_per_seq * s.block_size) {
      property_failed("a context length outside the table was accepted", "");
    }
    for (std::int64_t i = 0; i < (len + s.block_size - 1) / s.block_size; ++i) {
      const std::int32_t blk = c.block_tables[b * c.max_blocks_per_seq + i];
      if (blk < 0 || blk >= s.num_blocks) property_failed("a block outside the pool", "");
    }
    work += len * c.num_q_heads * s.head_dim;
  }
  // The measures themselves, where they stay quick (the inputs are a few KB).
  if (work > (1 << 20) || s.elements() > (1 << 20)) return;
  const decodebench::quant::ErrorMeasures m = decodebench::quant::measures(
      decodebench::quant::measure_format(c, decodebench::quant::KvFormat::int8));
  for (double x :
       {m.k_rel_rms, m.v_rel_rms, m.out_rel_l2, m.out_max_rel, m.attn_kl_mean, m.attn_kl_max}) {
    if (std::isnan(x) || x < 0) property_failed("int8's measures hold a NaN or a negative", "");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace decodebench;
  std::string_view rest = fuzz::as_text(data, size);
  std::string parts[6];
  for (std::string& part : parts) {
    const std::size_t at = rest.find(kSeparator);
    part = std::string(rest.substr(0, at));
    rest = at == std::string_view::npos ? std::string_view() : rest.substr(at + kSeparator.size());
  }
  quant::DumpFiles files{"fuzz",   "fuzz",   parts[0], parts[1],
                         parts[2], parts[3], parts[4], parts[5]};
  try {
    check(quant::parse_case(files));
  } catch (const InputError&) {
  }
  return 0;
}
