// `decodebench quantize`: one K or V pool through a KV format's quantizer and back, so that a
// script evaluating a format (scripts/kv_quant_eval.py) uses the very quantizer the kernels read.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "common/npy.h"
#include "quant/kv_quant.h"

namespace decodebench::cli {
namespace {

namespace fs = std::filesystem;

struct QuantizeArgs {
  std::string format;  // --kv-dtype
  std::string tensor;  // --tensor k|v
  std::string in, out;
  std::string codes_dir;  // --codes DIR
  bool quiet = false;
};

void write_codes(const fs::path& dir, const quant::QuantizedPool& q) {
  const quant::PoolShape& s = q.shape;
  const KvFormatInfo& info = kv_format(q.format);
  if (info.signed_codes) {  // one signed byte a code (int8)
    const std::int64_t shape[] = {s.num_blocks, s.kv_heads, s.block_size, s.head_dim};
    write_npy(dir / "codes.npy",
              std::span(reinterpret_cast<const std::int8_t*>(q.codes.data()), q.codes.size()),
              shape);
  } else {  // codes packed into bytes (int4: two a byte)
    const std::int64_t shape[] = {s.num_blocks, s.kv_heads, s.block_size,
                                  s.head_dim * info.code_bits / 8};
    write_npy(dir / "codes.npy", std::span<const std::uint8_t>(q.codes), shape);
  }
  const std::vector<std::int64_t> scale_shape = q.scale_shape();
  write_npy_f16(dir / "scales.npy", q.scales, scale_shape);
  if (quant::has_zeros(q.format)) write_npy_f16(dir / "zeros.npy", q.zeros, scale_shape);
}

int run_quantize(const QuantizeArgs& a) {
  // Everything is checked before the first file is written: a bad --codes must not leave OUT.
  const quant::KvFormat format = quant::parse_format(a.format, "--kv-dtype");
  const quant::KvTensor tensor = quant::parse_tensor(a.tensor, "--tensor");
  if (!a.codes_dir.empty() && quant::is_float_format(format)) {
    throw InputError(
        fmt::format("--codes: {} stores no codes and scales of its own (the float "
                    "formats are the values themselves; valid: {})",
                    quant::format_name(format), dtype_names(DtypeKind::integer)));
  }
  const NpyArray in = read_npy(a.in);
  if (in.descr != "<f4" || in.shape.size() != 4 || in.fortran_order) {
    throw InputError(
        fmt::format("{}: expected float32 [num_blocks, kv_heads, block_size, "
                    "head_dim] in C order (the --dump layout of k_cache.npy)",
                    a.in));
  }
  // An empty pool has no error to report (it printed "-nan B per token").
  if (std::find(in.shape.begin(), in.shape.end(), 0) != in.shape.end()) {
    throw InputError(fmt::format(
        "{}: shape [{}, {}, {}, {}] is empty; valid: every dimension >= 1 [num_blocks, kv_heads, "
        "block_size, head_dim]",
        a.in, in.shape[0], in.shape[1], in.shape[2], in.shape[3]));
  }
  const quant::PoolShape shape{in.shape[0], in.shape[1], in.shape[2], in.shape[3]};
  const std::vector<float> values = finite_floats(in, a.in);
  const quant::QuantizedPool q = quant::quantize(format, tensor, shape, values);
  const std::vector<float> back = quant::dequantize(q);
  check_output_file(a.out, "OUT");
  if (!a.codes_dir.empty()) check_output_dir(a.codes_dir, "--codes");

  write_npy(a.out, back, in.shape);
  if (!a.codes_dir.empty()) write_codes(a.codes_dir, q);
  if (!a.quiet) {
    double err2 = 0, ref2 = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      err2 += (back[i] - values[i]) * static_cast<double>(back[i] - values[i]);
      ref2 += values[i] * static_cast<double>(values[i]);
    }
    std::cerr << fmt::format(
        "{} {}: {} tokens x {} heads x {}, {:.2f} B per token and head ({} stored), rel rms "
        "error {:.3e} -> {}\n",
        quant::format_name(format), quant::tensor_name(tensor), shape.tokens(), shape.kv_heads,
        shape.head_dim,
        static_cast<double>(q.stored_bytes()) /
            static_cast<double>(shape.tokens() * shape.kv_heads),
        q.stored_bytes(), ref2 > 0 ? std::sqrt(err2 / ref2) : 0.0, a.out);
  }
  return kExitOk;
}

}  // namespace

void add_quantize_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "Round-trip a K or V cache through a KV format: IN.npy float32 [num_blocks, kv_heads, "
      "block_size, head_dim] -> OUT.npy, the same shape, the values a kernel reading the format "
      "attends over (docs/design.md \"KV formats\")");
  cmd->add_option("--kv-dtype", o->format, dtype_names(DtypeKind::all))->required();
  cmd->add_option("--tensor", o->tensor, "k or v (int4 scales keys per channel, values per token)")
      ->required();
  cmd->add_option("in", o->in, "Input .npy")->required();
  cmd->add_option("out", o->out, "Output .npy")->required();
  cmd->add_option("--codes", o->codes_dir,
                  "Also write the stored form into DIR: codes.npy (int8, or uint8 with two int4 "
                  "codes a byte, even channel low), scales.npy and zeros.npy (f16)");
  cmd->add_flag("--quiet,-q", o->quiet, "No summary line on stderr");
  cmd->callback([o, &exit_code] { exit_code = run_quantize(*o); });
}

}  // namespace decodebench::cli
