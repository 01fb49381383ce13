// A scratch A/B driver, kept beside the measurements it made (ab-quiet.txt); not built by the
// project. Variants of the CPU f16 decode walk, cold, in rotated rounds in one process, each
// sample paired with the read bandwidth of its flush. Build: see README.md, "Scratch A/B".
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/cpu/cpu_ceilings.h"
#include "backends/cpu/cpu_decode_driver.h"
#include "workload/workload.h"

using namespace decodebench;
using namespace decodebench::cpu::detail;
using Clock = std::chrono::steady_clock;

static void advise(const void* data, std::size_t bytes) {
  constexpr std::uintptr_t kHuge = std::uintptr_t{1} << 21;
  const auto first = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t begin = (first + kHuge - 1) & ~(kHuge - 1);
  const std::uintptr_t end = (first + bytes) & ~(kHuge - 1);
  if (end <= begin) return;
  if (::madvise(reinterpret_cast<void*>(begin), end - begin, 25) != 0)
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

struct Variant {
  std::string name;
  int near = 3, far_dist = 0, far_loc = 2, start = 2;
  std::function<void(const PagedDecodeParams&, int, int)> run;
};

template <int kT>
void run_tile(const PagedDecodeParams& p, int th, int sp) {
  decode_step<Avx512Tile<DType::f16, 128, kT>, DType::f16, 128>(p, th, sp);
}
template <int kT>
void run_walk(const PagedDecodeParams& p, int th, int sp) {
  decode_step<ReadOnlyTile<DType::f16, 128, kT>, DType::f16, 128>(p, th, sp);
}

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "ab MODEL BATCH CTX ROUNDS VARIANT... [SPLITS env]\n");
    return 2;
  }
  WorkloadSpec spec;
  spec.model = load_model(argv[1]);
  spec.batch = std::atoi(argv[2]);
  spec.context = ContextSpec::fixed(std::atoi(argv[3]));
  spec.kv_dtype = DType::f16;
  spec.seed = 1;
  const int rounds = std::atoi(argv[4]);
  Workload w = make_workload(spec);
  advise(w.k_cache.data(), w.k_cache.size());
  advise(w.v_cache.data(), w.v_cache.size());
  PagedDecodeParams p = w.params();
  std::vector<std::byte> out(static_cast<std::size_t>(spec.batch) * spec.model.num_q_heads * 128 *
                             2);
  p.out = out.data();
  const int threads = omp_get_max_threads();
  int splits = spec.batch == 1 ? 2 : 1;
  if (const char* s = std::getenv("SPLITS")) splits = std::atoi(s);
  const double kv_bytes = 2.0 * spec.batch * std::atoi(argv[3]) * spec.model.num_kv_heads * 256;

  // A variant: "tile=T,near=L,far=D,farloc=L,start=N,walk=0|1" (defaults: 64,3,0,2,2,0).
  std::vector<Variant> vs;
  for (int i = 5; i < argc; ++i) {
    Variant v;
    v.name = argv[i];
    int tile = 64, walk = 0;
    std::string spec_s = argv[i];
    if (spec_s == "base") spec_s = "";
    std::size_t pos = 0;
    while (pos < spec_s.size()) {
      std::size_t comma = spec_s.find(',', pos);
      if (comma == std::string::npos) comma = spec_s.size();
      const std::string kv = spec_s.substr(pos, comma - pos);
      const std::size_t eq = kv.find('=');
      const std::string key = kv.substr(0, eq);
      const int val = std::atoi(kv.c_str() + eq + 1);
      if (key == "tile")
        tile = val;
      else if (key == "near")
        v.near = val;
      else if (key == "far")
        v.far_dist = val;
      else if (key == "farloc")
        v.far_loc = val;
      else if (key == "start")
        v.start = val;
      else if (key == "walk")
        walk = val;
      else {
        std::fprintf(stderr, "bad key %s\n", key.c_str());
        return 2;
      }
      pos = comma + 1;
    }
    if (walk)
      v.run = tile == 16 ? run_walk<16> : tile == 32 ? run_walk<32> : run_walk<64>;
    else
      v.run = tile == 16    ? run_tile<16>
              : tile == 32  ? run_tile<32>
              : tile == 128 ? run_tile<128>
                            : run_tile<64>;
    vs.push_back(v);
  }
  cpu::CacheFlusher flusher;
  struct Acc {
    std::vector<double> t, frac, read;
  };
  std::vector<Acc> acc(vs.size());
  auto set = [](const Variant& v) {
    g_near_loc = v.near;
    g_far_dist = v.far_dist;
    g_far_loc = v.far_loc;
    g_start_lines = v.start;
  };
  for (auto& v : vs) {  // warm-up
    set(v);
    v.run(p, threads, splits);
  }
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t k = 0; k < vs.size(); ++k) {
      const std::size_t i = (k + r) % vs.size();
      set(vs[i]);
      cpu::evict_from_caches(w.k_cache.data(), w.k_cache.size());
      cpu::evict_from_caches(w.v_cache.data(), w.v_cache.size());
      const auto f0 = Clock::now();
      flusher.flush();
      const auto t0 = Clock::now();
      vs[i].run(p, threads, splits);
      const auto t1 = Clock::now();
      const double tf = std::chrono::duration<double>(t0 - f0).count();
      const double t = std::chrono::duration<double>(t1 - t0).count();
      const double read = flusher.bytes() / tf;
      acc[i].t.push_back(t);
      acc[i].read.push_back(read);
      acc[i].frac.push_back(kv_bytes / t / read);
    }
  }
  auto med = [](std::vector<double> x) {
    std::sort(x.begin(), x.end());
    return x[x.size() / 2];
  };
  const double rows =
      static_cast<double>(spec.batch) * std::atoi(argv[3]) * spec.model.num_kv_heads;
  std::printf("%s B%d x %s, threads %d, splits %d, rounds %d\n", argv[1], spec.batch, argv[3],
              threads, splits, rounds);
  for (std::size_t i = 0; i < vs.size(); ++i)
    std::printf(
        "%-14s median %7.3f ms  p10 %7.3f  GB/s %5.1f  paired %5.1f  %%paired(med) %5.1f  "
        "ns/row/thr %5.2f\n",
        vs[i].name.c_str(), med(acc[i].t) * 1e3,
        [&] {
          auto x = acc[i].t;
          std::sort(x.begin(), x.end());
          return x[x.size() / 10] * 1e3;
        }(),
        kv_bytes / med(acc[i].t) / 1e9, med(acc[i].read) / 1e9, 100 * med(acc[i].frac),
        med(acc[i].t) * threads / rows * 1e9);
  return 0;
}
