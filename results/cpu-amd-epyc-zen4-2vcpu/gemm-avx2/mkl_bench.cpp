// Scratch: MKL bf16/f16 GEMM rate on the layer's shapes, cold weights, paired read bandwidth.
#include <mkl.h>
#include <omp.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
using clk = std::chrono::steady_clock;
static std::vector<float> flushbuf(64 << 20 >> 2);
static double read_gbs() {
  static std::vector<float> big(256 << 20 >> 2, 1.0f);
  auto t0 = clk::now();
  float s = 0;
#pragma omp parallel for reduction(+ : s)
  for (size_t i = 0; i < big.size(); ++i) s += big[i];
  double dt = std::chrono::duration<double>(clk::now() - t0).count();
  if (s == 42) puts("");
  return big.size() * 4 / dt / 1e9;
}
static void flush() {
  float s = 0;
#pragma omp parallel for reduction(+ : s)
  for (size_t i = 0; i < flushbuf.size(); ++i) s += flushbuf[i];
  if (s == 42) puts("");
}
int main(int argc, char** argv) {
  bool f16 = argc > 1 && std::string(argv[1]) == "f16";
  bool packed = argc > 2 && std::string(argv[2]) == "packed";
  struct S {
    const char* name;
    long n, k;
  } shapes[] = {
      {"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
  for (auto& sh : shapes) {
    std::vector<unsigned short> W(sh.n * sh.k);
    for (size_t i = 0; i < W.size(); ++i) W[i] = f16 ? 0x3c00 ^ (i & 0x3ff) : 0x3f80 ^ (i & 0x7f);
    unsigned short* Wp = W.data();
    std::vector<unsigned short> P;
    size_t bytes = W.size() * 2;
    if (packed) {
      size_t sz = f16 ? cblas_gemm_f16f16f32_pack_get_size(CblasBMatrix, 1, sh.n, sh.k)
                      : cblas_gemm_bf16bf16f32_pack_get_size(CblasBMatrix, 1, sh.n, sh.k);
      P.resize(sz / 2 + 64);
      if (f16)
        cblas_gemm_f16f16f32_pack(CblasRowMajor, CblasBMatrix, CblasTrans, 1, sh.n, sh.k, W.data(),
                                  sh.k, P.data());
      else
        cblas_gemm_bf16bf16f32_pack(CblasRowMajor, CblasBMatrix, CblasTrans, 1, sh.n, sh.k,
                                    W.data(), sh.k, P.data());
      printf("# %s packed size %.2f bytes/elem\n", sh.name, double(sz) / W.size());
      Wp = P.data();
      bytes = sz;
    }
    for (long m : {1L, 8L, 64L, 256L}) {
      std::vector<unsigned short> x(m * sh.k, f16 ? 0x3c00 : 0x3f80);
      std::vector<float> y(m * sh.n);
      auto call = [&] {
        if (packed) {
          if (f16)
            cblas_gemm_f16f16f32_compute(CblasRowMajor, CblasNoTrans, CblasPacked, m, sh.n, sh.k,
                                         1.f, x.data(), sh.k, Wp, sh.k, 0.f, y.data(), sh.n);
          else
            cblas_gemm_bf16bf16f32_compute(CblasRowMajor, CblasNoTrans, CblasPacked, m, sh.n, sh.k,
                                           1.f, x.data(), sh.k, Wp, sh.k, 0.f, y.data(), sh.n);
        } else {
          if (getenv("SWAP")) {  // y^T [n][m] = W [n][k] x^T
            if (f16)
              cblas_gemm_f16f16f32(CblasRowMajor, CblasNoTrans, CblasTrans, sh.n, m, sh.k, 1.f, Wp,
                                   sh.k, x.data(), sh.k, 0.f, y.data(), m);
            else
              cblas_gemm_bf16bf16f32(CblasRowMajor, CblasNoTrans, CblasTrans, sh.n, m, sh.k, 1.f,
                                     Wp, sh.k, x.data(), sh.k, 0.f, y.data(), m);
          } else if (f16)
            cblas_gemm_f16f16f32(CblasRowMajor, CblasNoTrans, CblasTrans, m, sh.n, sh.k, 1.f,
                                 x.data(), sh.k, Wp, sh.k, 0.f, y.data(), sh.n);
          else
            cblas_gemm_bf16bf16f32(CblasRowMajor, CblasNoTrans, CblasTrans, m, sh.n, sh.k, 1.f,
                                   x.data(), sh.k, Wp, sh.k, 0.f, y.data(), sh.n);
        }
      };
      call();
      std::vector<double> fr, ts;
      for (int r = 0; r < 7; ++r) {
        double bw = read_gbs();
        flush();
        auto t0 = clk::now();
        call();
        double dt = std::chrono::duration<double>(clk::now() - t0).count();
        ts.push_back(dt);
        fr.push_back(bytes / dt / 1e9 / bw);
      }
      std::sort(ts.begin(), ts.end());
      std::sort(fr.begin(), fr.end());
      printf("%s %s %-8s m=%-4ld %8.3f ms  %6.1f GB/s  frac %.2f  %7.1f GFLOP/s\n",
             f16 ? "f16" : "bf16", packed ? "packed" : "plain", sh.name, m, ts[3] * 1e3,
             bytes / ts[3] / 1e9, fr[3], 2.0 * m * sh.n * sh.k / ts[3] / 1e9);
    }
  }
}
