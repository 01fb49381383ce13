// Scratch: oneDNN bf16/f16 matmul, m rows x W^T, packed weights, cold; impl name printed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <dnnl.hpp>
#include <string>
#include <vector>
using namespace dnnl;
using clk = std::chrono::steady_clock;
static std::vector<float> flushbuf(64 << 20 >> 2, 1.f);
static std::vector<float> big(256 << 20 >> 2, 1.0f);
static double readbw() {
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
  auto wdt = (argc > 1 && std::string(argv[1]) == "f16") ? memory::data_type::f16
                                                         : memory::data_type::bf16;
  bool plain = argc > 2 && std::string(argv[2]) == "plain";
  auto sdt = (argc > 3 && std::string(argv[3]) == "f32src") ? memory::data_type::f32 : wdt;
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  struct S {
    const char* name;
    long n, k;
  } shapes[] = {
      {"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
  for (auto& sh : shapes)
    for (long m : {1L, 8L, 64L, 256L}) {
      memory::desc xd({m, sh.k}, sdt, memory::format_tag::ab);
      memory::desc wraw({sh.k, sh.n}, wdt, memory::format_tag::ba);
      memory::desc wany({sh.k, sh.n}, wdt,
                        plain ? memory::format_tag::ba : memory::format_tag::any);
      memory::desc yd({m, sh.n}, sdt, memory::format_tag::ab);
      primitive_attr attr;
      if (sdt != wdt) attr.set_fpmath_mode(fpmath_mode::any, true);
      matmul::primitive_desc pd;
      try {
        pd = matmul::primitive_desc(eng, xd, wany, yd, attr);
      } catch (error& e) {
        printf("%s m=%ld: no primitive (%s)\n", sh.name, m, e.what());
        continue;
      }
      memory wr(wraw, eng);
      std::vector<unsigned short> init(sh.n * sh.k,
                                       wdt == memory::data_type::f16 ? 0x3c00 : 0x3f80);
      std::copy(init.begin(), init.end(), (unsigned short*)wr.get_data_handle());
      memory wp(pd.weights_desc(), eng);
      reorder(wr, wp).execute(s, wr, wp);
      s.wait();
      memory x(xd, eng), y(yd, eng);
      memset(x.get_data_handle(), 0, xd.get_size());
      matmul mm(pd);
      auto run = [&] {
        mm.execute(s, {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, wp}, {DNNL_ARG_DST, y}});
        s.wait();
      };
      run();
      std::vector<double> ts, fr;
      size_t bytes = pd.weights_desc().get_size();
      for (int r = 0; r < 7; ++r) {
        double bw = readbw();
        flush();
        auto t0 = clk::now();
        run();
        double dt = std::chrono::duration<double>(clk::now() - t0).count();
        ts.push_back(dt);
        fr.push_back(bytes / dt / 1e9 / bw);
      }
      std::sort(ts.begin(), ts.end());
      std::sort(fr.begin(), fr.end());
      printf("%-8s m=%-4ld %8.3f ms %6.1f GB/s frac %.2f %7.1f GFLOP/s  %s\n", sh.name, m,
             ts[3] * 1e3, bytes / ts[3] / 1e9, fr[3], 2.0 * m * sh.n * sh.k / ts[3] / 1e9,
             pd.impl_info_str());
    }
}
