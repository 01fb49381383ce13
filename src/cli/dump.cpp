#include "cli/dump.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/dtype.h"
#include "common/errors.h"
#include "common/npy.h"
#include "quant/kv_quant.h"
#include "reference/reference.h"
#include "results/report.h"

namespace decodebench::cli {

namespace {

// An integer format's K and V: the dequantized cache (what the kernel read), the values before
// quantization, and the codes, scales and zeros as stored, so the format can be rechecked.
void write_quantized_cache(const std::filesystem::path& dir, const Workload& w,
                           std::span<const std::int64_t> kvshape) {
  const WorkloadSpec& s = w.spec;
  for (const Tensor t : {Tensor::k, Tensor::v}) {
    const bool is_k = t == Tensor::k;
    const std::string name = is_k ? "k" : "v";
    write_npy(dir / (name + "_cache.npy"), dequantized_kv(w, t), kvshape);
    write_npy(dir / (name + "_source.npy"), kv_source_values(w, t), kvshape);
    const std::vector<std::byte>& codes = is_k ? w.k_cache : w.v_cache;
    std::vector<std::int64_t> code_shape(kvshape.begin(), kvshape.end());
    if (kv_format(s.kv_dtype).signed_codes) {  // one signed byte a code (int8)
      write_npy(dir / (name + "_codes.npy"),
                std::span(reinterpret_cast<const std::int8_t*>(codes.data()), codes.size()),
                code_shape);
    } else {
      // Codes packed into bytes (int4: two a byte, even channel in the low nibble).
      code_shape.back() = code_shape.back() * kv_format(s.kv_dtype).code_bits / 8;
      write_npy(dir / (name + "_codes.npy"),
                std::span(reinterpret_cast<const std::uint8_t*>(codes.data()), codes.size()),
                code_shape);
    }
    quant::QuantizedPool layout;  // for the scales' shape only
    layout.format = s.kv_dtype;
    layout.tensor = is_k ? quant::KvTensor::k : quant::KvTensor::v;
    layout.shape = {kvshape[0], kvshape[1], kvshape[2], kvshape[3]};
    const std::vector<std::int64_t> scale_shape = layout.scale_shape();
    write_npy_f16(dir / (name + "_scales.npy"), is_k ? w.k_scales : w.v_scales, scale_shape);
    if (quant::has_zeros(s.kv_dtype))
      write_npy_f16(dir / (name + "_zeros.npy"), is_k ? w.k_zeros : w.v_zeros, scale_shape);
  }
}

}  // namespace

void write_dump(const std::filesystem::path& dir, Backend& backend, const SweepPoint& point,
                const PointResult& result) {
  if (result.status == PointStatus::skipped) {
    throw InputError("--dump: the point was skipped, nothing ran to dump: " + result.reason);
  }
  const std::string kernel = !result.kernel.empty()   ? result.kernel
                             : point.kernel == "auto" ? backend.choose_kernel(point.spec)
                                                      : point.kernel;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw RuntimeFailure("--dump: cannot create " + dir.string() + ": " + ec.message());

  // The same workload the sweep ran: every value is a pure function of the seed. A model whose
  // layers differ is dumped as its first kind of layer (the windowed one), which meta.json says.
  WorkloadSpec spec = point.spec;
  const std::vector<ModelShape::LayerClass> kinds = spec.model.layer_classes();
  if (kinds.size() > 1) spec.model = spec.model.with_window(kinds[0].window);
  const Workload w = make_workload(spec);
  const WorkloadSpec& s = w.spec;
  const PagedLayout& layout = w.layout;
  const std::int64_t batch = w.rows();
  const std::int64_t hq = s.model.num_q_heads, hkv = s.model.num_kv_heads, d = s.model.head_dim;
  const std::int64_t p = s.block_size;
  const std::int64_t dv = s.model.value_dim();  // MLA: the first kv_lora_rank of each K row

  std::unique_ptr<PreparedPoint> prepared = backend.prepare(w, kernel, TimingOptions{});
  prepared->run();
  const std::vector<float> out = prepared->output();   // [B][Hq][dv]
  const std::vector<float> ref = reference_decode(w);  // [B][Hq][dv]

  const std::int64_t qshape[] = {batch, hq, d};
  const std::int64_t oshape[] = {batch, hq, dv};
  const std::int64_t kvshape[] = {layout.num_blocks, hkv, p, d};
  const std::int64_t tshape[] = {batch, layout.max_blocks_per_seq};
  const std::int64_t lshape[] = {batch};
  write_npy(dir / "q.npy", decode_to_float(w.q, s.q_dtype), qshape);
  if (is_int_kv(s.kv_dtype)) {
    write_quantized_cache(dir, w, kvshape);
  } else {
    write_npy(dir / "k_cache.npy", decode_to_float(w.k_cache, s.kv_dtype), kvshape);  // unscaled
    if (!s.model.is_mla())  // MLA's values are the K rows' first dv: no file of their own
      write_npy(dir / "v_cache.npy", decode_to_float(w.v_cache, s.kv_dtype), kvshape);  // unscaled
  }
  write_npy(dir / "block_tables.npy", std::span<const std::int32_t>(layout.block_tables), tshape);
  write_npy(dir / "context_lens.npy", std::span<const std::int32_t>(layout.context_lens), lshape);
  write_npy(dir / "out.npy", out, oshape);
  write_npy(dir / "ref.npy", ref, oshape);
  if (s.model.sinks) {
    const std::int64_t sshape[] = {hq};
    write_npy(dir / "sinks.npy", w.sinks, sshape);
  }

  nlohmann::json meta = {
      {"kernel", kernel},
      {"backend", backend.name()},
      {"model", s.model.name},
      {"num_q_heads", hq},
      {"num_kv_heads", hkv},
      {"head_dim", d},
      {"block_size", p},
      {"kv_dtype", dtype_name(s.kv_dtype)},
      {"q_dtype", dtype_name(s.q_dtype)},
      {"softmax_scale", w.softmax_scale},
      {"k_scale", w.k_scale},
      {"v_scale", w.v_scale},
      {"hit_rate", s.hit_rate},
      {"hit_rate_actual", layout.hit_rate_actual},
      {"prefix_groups", s.prefix_groups},
      {"seed", s.seed},
      // Beyond the required keys: what a reader needs to interpret the files.
      {"batch", batch},
      {"context", context_label(s.context)},
      {"status", status_name(result.status)},
      {"num_blocks", layout.num_blocks},
      {"max_blocks_per_seq", layout.max_blocks_per_seq},
      {"note",
       std::string(is_int_kv(s.kv_dtype)
                       ? "k_cache/v_cache hold the dequantized values the kernel attended over "
                         "(k_scale = v_scale = 1), k_source/v_source the values before "
                         "quantization, k_codes/k_scales/k_zeros (and v_) the format as stored "
                         "(docs/design.md \"KV formats\"). "
                       : "k_cache/v_cache hold the stored values. ") +
           "Real K = k_cache * k_scale, real V = v_cache * v_scale. out[b,h] = "
           "softmax(softmax_scale * k_scale * K . q[b,h]) @ (v_scale * V) over the "
           "context_lens[b] tokens found through block_tables[b]; query head h reads KV head "
           "h // (num_q_heads / num_kv_heads)."}};
  // The attention's variants, only where the model has them (a plain point's meta is as before).
  const int window = s.model.uniform_window();
  if (window > 0) {
    meta["window"] = window;
    meta["note"] = meta["note"].get<std::string>() +
                   " window: only the last `window` tokens of each context are attended to.";
  }
  if (s.model.is_mla()) {
    meta["attention"] = "mla";
    meta["kv_lora_rank"] = s.model.kv_lora_rank;
    meta["qk_rope_head_dim"] = s.model.qk_rope_head_dim;
    meta["note"] = meta["note"].get<std::string>() +
                   " MLA (absorbed): k_cache holds one latent row per token (num_kv_heads 1, "
                   "head_dim kv_lora_rank + qk_rope_head_dim); there is no v_cache.npy: V is the "
                   "first kv_lora_rank values of each K row (v_scale = k_scale), so out is "
                   "[batch, num_q_heads, kv_lora_rank]. softmax_scale is the model's own "
                   "(DeepSeek's YaRN-scaled 1/sqrt(qk_nope_head_dim + qk_rope_head_dim)), not "
                   "1/sqrt(head_dim).";
  }
  if (kinds.size() > 1) {
    meta["layers_of_this_kind"] = kinds[0].layers;
    meta["num_layers"] = s.model.num_layers;
  }
  if (s.model.sinks) {
    meta["sinks"] = true;
    meta["note"] = meta["note"].get<std::string>() +
                   " sinks.npy [num_q_heads]: each head's sink logit joins the softmax's "
                   "denominator as exp(sink) and adds no value.";
  }
  if (s.model.attn_logit_softcapping > 0) {
    meta["attn_logit_softcapping"] = s.model.attn_logit_softcapping;
    meta["note"] = meta["note"].get<std::string>() +
                   " Each scaled score x is soft-capped to c * tanh(x / c), c = "
                   "attn_logit_softcapping, before the softmax.";
  }
  write_text_atomic(dir / "meta.json", meta.dump(2) + "\n");
}

}  // namespace decodebench::cli
