// Unit tests of every primitive of the portable device layer as the SIMT emulator provides it,
// against tables of expected values (literal rows, and a model written from the CUDA
// programming guide's wording, not from PTX like the emulator). Each kernel here is a few lines
// of CUDA C++ compiled by the host compiler through device/device.h.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "device/device.h"

namespace decodebench {
namespace {

constexpr std::uint32_t kPoison = 0xFFFFFFFFu;

// --- warp shuffles ----------------------------------------------------------------------------

enum class Mode { idx, up, down, bfly };

struct ShflParams {
  Mode mode;
  int b;  // source lane / delta / lane mask
  int width;
  int exit_from;       // lanes >= exit_from return before the shuffle
  std::uint32_t* out;  // [blockDim.x]
};

__global__ void shfl_kernel(const __grid_constant__ ShflParams p) {
  const unsigned t = threadIdx.x;
  if (static_cast<int>(t % 32) >= p.exit_from) return;
  const unsigned v = 1000 + t;
  unsigned r = 0;
  switch (p.mode) {
    case Mode::idx: r = __shfl_sync(0xffffffffu, v, p.b, p.width); break;
    case Mode::up: r = __shfl_up_sync(0xffffffffu, v, static_cast<unsigned>(p.b), p.width); break;
    case Mode::down:
      r = __shfl_down_sync(0xffffffffu, v, static_cast<unsigned>(p.b), p.width);
      break;
    case Mode::bfly: r = __shfl_xor_sync(0xffffffffu, v, p.b, p.width); break;
  }
  p.out[t] = r;
}

std::vector<std::uint32_t> run_shfl(Mode mode, int b, int width, int threads = 32,
                                    int exit_from = 32) {
  std::vector<std::uint32_t> out(static_cast<std::size_t>(threads), 0xdeadbeefu);
  const ShflParams p{mode, b, width, exit_from, out.data()};
  const kernels::LaunchResult r =
      DECODEBENCH_LAUNCH(shfl_kernel, dim3(1), dim3(threads), 0, nullptr, p);
  EXPECT_TRUE(r.ok()) << r.message;
  return out;
}

// Source lane per the CUDA C++ Programming Guide ("Warp Shuffle Functions"), -1 = own value.
int guide_source(Mode mode, int lane, int b, int width) {
  const int base = lane / width * width;
  switch (mode) {
    case Mode::idx: return base + b % width;
    case Mode::up: return lane - base - b < 0 ? -1 : lane - b;
    case Mode::down: return lane - base + b >= width ? -1 : lane + b;
    case Mode::bfly: {
      // "if they attempt to access elements from later groups of threads their own value of
      // var will be returned"; earlier groups are reachable.
      const int src = lane ^ b;
      return src / width > lane / width ? -1 : src;
    }
  }
  return -1;
}

TEST(EmuShuffle, LiteralTable) {
  struct Row {
    Mode mode;
    int b;
    int width;
    std::array<unsigned, 32> expect_src;  // source lane of each lane
  };
  auto iota_with = [](auto f) {
    std::array<unsigned, 32> a{};
    for (int i = 0; i < 32; ++i) a[static_cast<std::size_t>(i)] = static_cast<unsigned>(f(i));
    return a;
  };
  const Row rows[] = {
      // xor 1: neighbours swap.
      {Mode::bfly, 1, 32, {1,  0,  3,  2,  5,  4,  7,  6,  9,  8,  11, 10, 13, 12, 15, 14,
                           17, 16, 19, 18, 21, 20, 23, 22, 25, 24, 27, 26, 29, 28, 31, 30}},
      // down 1 in segments of 8: the last lane of each segment keeps its own value.
      {Mode::down, 1, 8, {1,  2,  3,  4,  5,  6,  7,  7,  9,  10, 11, 12, 13, 14, 15, 15,
                          17, 18, 19, 20, 21, 22, 23, 23, 25, 26, 27, 28, 29, 30, 31, 31}},
      // up 2 in segments of 4: the first two lanes of each segment keep their own.
      {Mode::up, 2, 4, {0,  1,  0,  1,  4,  5,  4,  5,  8,  9,  8,  9,  12, 13, 12, 13,
                        16, 17, 16, 17, 20, 21, 20, 21, 24, 25, 24, 25, 28, 29, 28, 29}},
      // idx 3 in segments of 16: broadcast of lane 3 and lane 19; src 35 is 35 % 16 = 3 too.
      {Mode::idx, 3, 16, iota_with([](int i) { return i < 16 ? 3 : 19; })},
      {Mode::idx, 35, 16, iota_with([](int i) { return i < 16 ? 3 : 19; })},
      // xor 16 with width 8: later groups are out of reach (own value); lanes 16..23 reach 0..7.
      {Mode::bfly, 16, 8, iota_with([](int i) { return i < 16 ? i : i - 16; })},
  };
  for (const Row& row : rows) {
    const auto out = run_shfl(row.mode, row.b, row.width);
    for (int lane = 0; lane < 32; ++lane) {
      EXPECT_EQ(out[static_cast<std::size_t>(lane)],
                1000 + row.expect_src[static_cast<std::size_t>(lane)])
          << "mode " << static_cast<int>(row.mode) << " b " << row.b << " width " << row.width
          << " lane " << lane;
    }
  }
}

TEST(EmuShuffle, EveryModeWidthAndOperandMatchesTheGuide) {
  for (Mode mode : {Mode::idx, Mode::up, Mode::down, Mode::bfly}) {
    for (int width : {2, 4, 8, 16, 32}) {
      for (int b : {0, 1, 2, 3, 5, 7, 8, 13, 16, 31}) {
        const auto out = run_shfl(mode, b, width);
        for (int lane = 0; lane < 32; ++lane) {
          const int src = guide_source(mode, lane, b, width);
          const unsigned expect = 1000 + static_cast<unsigned>(src < 0 ? lane : src);
          ASSERT_EQ(out[static_cast<std::size_t>(lane)], expect)
              << "mode " << static_cast<int>(mode) << " width " << width << " b " << b << " lane "
              << lane;
        }
      }
    }
  }
}

TEST(EmuShuffle, PartialLastWarpReadsPoisonFromAbsentLanes) {
  // 40 threads: warp 1 has lanes 0..7 only. down 4: lanes 0..3 read 4..7; 4..7 read absent lanes.
  const auto out = run_shfl(Mode::down, 4, 32, /*threads=*/40);
  for (int t = 32; t < 36; ++t) EXPECT_EQ(out[static_cast<std::size_t>(t)], 1000u + t + 4);
  for (int t = 36; t < 40; ++t) EXPECT_EQ(out[static_cast<std::size_t>(t)], kPoison) << t;
  for (int t = 0; t < 28; ++t) EXPECT_EQ(out[static_cast<std::size_t>(t)], 1000u + t + 4);
}

TEST(EmuShuffle, ExitedLanesDoNotBlockAndReadAsPoison) {
  // Lanes 16..31 return first; 0..15 still complete their shuffle (arrive-and-drop).
  const auto xor1 = run_shfl(Mode::bfly, 1, 32, 32, /*exit_from=*/16);
  for (int t = 0; t < 16; ++t) EXPECT_EQ(xor1[static_cast<std::size_t>(t)], 1000u + (t ^ 1));
  for (int t = 16; t < 32; ++t) EXPECT_EQ(xor1[static_cast<std::size_t>(t)], 0xdeadbeefu);
  const auto xor16 = run_shfl(Mode::bfly, 16, 32, 32, /*exit_from=*/16);
  for (int t = 0; t < 16; ++t) EXPECT_EQ(xor16[static_cast<std::size_t>(t)], kPoison);
}

struct WideParams {
  double* out;
  float* sums;
  unsigned* votes;
};

__global__ void wide_kernel(const __grid_constant__ WideParams p) {
  const int t = static_cast<int>(threadIdx.x);
  // 8-byte shuffle.
  p.out[t] = __shfl_down_sync(0xffffffffu, 0.5 + t, 3);
  // Butterfly reduction: every lane ends with the warp's sum.
  float v = static_cast<float>(t);
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  p.sums[t] = v;
  // Votes.
  const unsigned ballot = __ballot_sync(0xffffffffu, t % 3 == 0);
  const int any = __any_sync(0xffffffffu, t == 17);
  const int all = __all_sync(0xffffffffu, t < 64);
  const int none = __any_sync(0xffffffffu, t > 100);
  if (t == 0) {
    p.votes[0] = ballot;
    p.votes[1] = static_cast<unsigned>(any);
    p.votes[2] = static_cast<unsigned>(all);
    p.votes[3] = static_cast<unsigned>(none);
  }
  __syncwarp();
}

TEST(EmuShuffle, EightByteValuesReductionAndVotes) {
  std::vector<double> out(32);
  std::vector<float> sums(32);
  std::vector<unsigned> votes(4);
  const WideParams p{out.data(), sums.data(), votes.data()};
  const auto r = DECODEBENCH_LAUNCH(wide_kernel, dim3(1), dim3(32), 0, nullptr, p);
  ASSERT_TRUE(r.ok()) << r.message;
  for (int t = 0; t < 32; ++t) {
    EXPECT_EQ(out[static_cast<std::size_t>(t)], 0.5 + (t + 3 < 32 ? t + 3 : t));
    EXPECT_EQ(sums[static_cast<std::size_t>(t)], 496.f);
  }
  EXPECT_EQ(votes[0], 0x49249249u);  // lanes 0, 3, 6, ..., 30
  EXPECT_EQ(votes[1], 1u);
  EXPECT_EQ(votes[2], 1u);
  EXPECT_EQ(votes[3], 0u);
}

struct WidthErrorParams {
  int width;
};
__global__ void bad_width_kernel(const __grid_constant__ WidthErrorParams p) {
  (void)__shfl_xor_sync(0xffffffffu, 1.f, 1, p.width);
}

TEST(EmuShuffle, WidthThatIsNotAPowerOfTwoIsAnError) {
  const auto r =
      DECODEBENCH_LAUNCH(bad_width_kernel, dim3(1), dim3(32), 0, nullptr, WidthErrorParams{12});
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.message.find("width 12 is not a power of two"), std::string::npos) << r.message;
}

__global__ void partial_mask_kernel(const __grid_constant__ WidthErrorParams) {
  (void)__shfl_xor_sync(0x0000ffffu, 1.f, 1);
}

TEST(EmuShuffle, SubWarpMaskLeavingOutLiveLanesIsReported) {
  const auto r =
      DECODEBENCH_LAUNCH(partial_mask_kernel, dim3(1), dim3(32), 0, nullptr, WidthErrorParams{32});
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.message.find("sub-warp masks are not emulated"), std::string::npos) << r.message;
}

// --- __syncthreads ----------------------------------------------------------------------------

struct RotateParams {
  int rounds;
  int* out;  // [blockDim]
};

// Each round: everyone writes, barrier, everyone reads a neighbour, barrier. Any barrier that
// did not order would show a stale value (or poison) in the exact checksum.
__global__ void rotate_kernel(const __grid_constant__ RotateParams p) {
  DECODEBENCH_SHARED(int, s, 256);
  const int n = static_cast<int>(blockDim.x * blockDim.y * blockDim.z);
  const int t =
      static_cast<int>(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  int v = t;
  for (int round = 0; round < p.rounds; ++round) {
    s[t] = v;
    __syncthreads();
    v = s[(t + 1) % n] + 1;
    __syncthreads();
  }
  p.out[t] = v;
}

TEST(EmuSyncthreads, OrdersEveryRoundIn3dBlocks) {
  const int rounds = 20;
  std::vector<int> out(96, -1);
  const RotateParams p{rounds, out.data()};
  const auto r = DECODEBENCH_LAUNCH(rotate_kernel, dim3(1), dim3(4, 6, 4), 0, nullptr, p);
  ASSERT_TRUE(r.ok()) << r.message;
  for (int t = 0; t < 96; ++t)
    EXPECT_EQ(out[static_cast<std::size_t>(t)], (t + rounds) % 96 + rounds) << t;
}

struct EarlyExitParams {
  int keep;  // threads < keep stay
  int* out;
};

__global__ void early_exit_kernel(const __grid_constant__ EarlyExitParams p) {
  DECODEBENCH_SHARED(int, s, 128);
  const int t = static_cast<int>(threadIdx.x);
  if (t >= p.keep) return;  // legal on NVIDIA: exited threads no longer count at the barrier
  int v = t;
  for (int round = 0; round < 3; ++round) {
    s[t] = v;
    __syncthreads();
    v = s[(t + 1) % p.keep];
    __syncthreads();
  }
  p.out[t] = v;
}

TEST(EmuSyncthreads, EarlyReturnArrivesAndDrops) {
  for (int keep : {1, 31, 50, 127}) {
    std::vector<int> out(128, -1);
    const EarlyExitParams p{keep, out.data()};
    const auto r = DECODEBENCH_LAUNCH(early_exit_kernel, dim3(2), dim3(128), 0, nullptr, p);
    ASSERT_TRUE(r.ok()) << r.message;
    for (int t = 0; t < keep; ++t) EXPECT_EQ(out[static_cast<std::size_t>(t)], (t + 3) % keep);
    for (int t = keep; t < 128; ++t) EXPECT_EQ(out[static_cast<std::size_t>(t)], -1);
  }
}

__global__ void divergent_kernel(const __grid_constant__ EarlyExitParams p) {
  if (static_cast<int>(threadIdx.x) < p.keep) {
    __syncthreads();
  } else {
    __syncthreads();
  }
}

TEST(EmuSyncthreads, DivergentBarrierIsReportedWithBothSites) {
  const auto r = DECODEBENCH_LAUNCH(divergent_kernel, dim3(3), dim3(64), 0, nullptr,
                                    (EarlyExitParams{40, nullptr}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message.find("divergent_kernel"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("block (0,0,0)"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("threads 0-39 at"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("threads 40-63 at"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("emu_test.cpp:"), std::string::npos) << r.message;
}

__global__ void deadlock_kernel(const __grid_constant__ EarlyExitParams) {
  // Lane 0 waits at the block barrier while lanes 1..31 wait for it in a shuffle.
  if (threadIdx.x == 0) {
    __syncthreads();
  } else {
    (void)__shfl_xor_sync(0xffffffffu, 1, 1);
    __syncthreads();
  }
}

TEST(EmuSyncthreads, DeadlockIsReportedNotHung) {
  const auto r =
      DECODEBENCH_LAUNCH(deadlock_kernel, dim3(1), dim3(32), 0, nullptr, EarlyExitParams{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message.find("deadlock"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("__shfl_xor_sync"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("__syncthreads"), std::string::npos) << r.message;
}

// --- shared memory ----------------------------------------------------------------------------

struct SmemParams {
  int n;
  std::uint32_t* first_static;   // [grid] what each block's static array held before writing
  std::uint32_t* first_dynamic;  // [grid]
  std::uintptr_t* dyn_address;   // [grid]
  int* sum;                      // [grid]
};

__global__ void smem_kernel(const __grid_constant__ SmemParams p) {
  DECODEBENCH_SHARED(std::uint32_t, s_static, 64);
  DECODEBENCH_DYNAMIC_SHARED(int, s_dyn);
  const int t = static_cast<int>(threadIdx.x);
  const int b = static_cast<int>(blockIdx.x);
  if (t == 0) {
    p.first_static[b] = s_static[63];
    p.first_dynamic[b] = static_cast<std::uint32_t>(s_dyn[p.n - 1]);
    p.dyn_address[b] = reinterpret_cast<std::uintptr_t>(s_dyn);
  }
  __syncthreads();
  s_static[t] = 7u;
  s_dyn[t] = t;
  __syncthreads();
  if (t == 0) {
    int total = 0;
    for (int i = 0; i < p.n; ++i) total += s_dyn[i] + static_cast<int>(s_static[i]);
    p.sum[b] = total;
  }
}

TEST(EmuSharedMemory, StaticAndDynamicArePoisonedPerBlockAndAligned) {
  constexpr int kN = 64, kGrid = 3;
  std::vector<std::uint32_t> first_static(kGrid), first_dynamic(kGrid);
  std::vector<std::uintptr_t> address(kGrid);
  std::vector<int> sum(kGrid);
  const SmemParams p{kN, first_static.data(), first_dynamic.data(), address.data(), sum.data()};
  const auto r =
      DECODEBENCH_LAUNCH(smem_kernel, dim3(kGrid), dim3(kN), kN * sizeof(int), nullptr, p);
  ASSERT_TRUE(r.ok()) << r.message;
  for (int b = 0; b < kGrid; ++b) {
    // Block 1 and 2 see poison again although block 0 wrote 7s.
    EXPECT_EQ(first_static[static_cast<std::size_t>(b)], kPoison) << b;
    EXPECT_EQ(first_dynamic[static_cast<std::size_t>(b)], kPoison) << b;
    EXPECT_EQ(address[static_cast<std::size_t>(b)] % 16, 0u);
    EXPECT_EQ(sum[static_cast<std::size_t>(b)], kN * (kN - 1) / 2 + 7 * kN);
  }
}

// --- cp.async ---------------------------------------------------------------------------------

struct CopyParams {
  int src_bytes;
  const unsigned char* src;  // 16-byte aligned
  unsigned char* out;        // [16]
};

template <int N>
__global__ void cp_async_kernel(const __grid_constant__ CopyParams p) {
  DECODEBENCH_SHARED(unsigned char, s, 16);
  dev::cp_async<N>(s, p.src, p.src_bytes);
  dev::cp_async_commit();
  dev::cp_async_wait<0>();
  for (int i = 0; i < 16; ++i) p.out[i] = s[i];
}

template <int N>
void check_cp_async(int src_bytes) {
  alignas(16) unsigned char src[16];
  for (int i = 0; i < 16; ++i) src[i] = static_cast<unsigned char>(0x10 + i);
  unsigned char out[16];
  std::memset(out, 0xAB, sizeof out);
  const CopyParams p{src_bytes, src, out};
  const auto r = DECODEBENCH_LAUNCH((cp_async_kernel<N>), dim3(1), dim3(1), 0, nullptr, p);
  ASSERT_TRUE(r.ok()) << r.message;
  const int copied = src_bytes < 0 ? 0 : (src_bytes > N ? N : src_bytes);
  for (int i = 0; i < 16; ++i) {
    const int expect =
        i < copied ? 0x10 + i : (i < N ? 0x00 : 0xFF);  // data, zero-fill, untouched poison
    EXPECT_EQ(out[i], expect) << "N " << N << " src_bytes " << src_bytes << " byte " << i;
  }
}

TEST(EmuCpAsync, SizesAndZeroFill) {
  for (int src_bytes : {-3, 0, 1, 2, 3, 4}) check_cp_async<4>(src_bytes);
  for (int src_bytes : {0, 1, 4, 7, 8, 9}) check_cp_async<8>(src_bytes);
  for (int src_bytes : {0, 1, 8, 15, 16, 40}) check_cp_async<16>(src_bytes);
}

struct GroupParams {
  const std::uint32_t* src;  // [4]
  std::uint32_t* seen;       // [12] snapshots of s[0..3] after each wait
};

__global__ void wait_group_kernel(const __grid_constant__ GroupParams p) {
  DECODEBENCH_SHARED(std::uint32_t, s, 4);
  for (int g = 0; g < 3; ++g) {  // three committed groups of one copy each
    dev::cp_async<4>(&s[g], &p.src[g], 4);
    dev::cp_async_commit();
  }
  dev::cp_async<4>(&s[3], &p.src[3], 4);  // issued, never committed before the waits below
  dev::cp_async_wait<2>();                // group 0 has landed; 1 and 2 may be in flight
  for (int i = 0; i < 4; ++i) p.seen[i] = s[i];
  dev::cp_async_wait<1>();  // groups 0 and 1
  for (int i = 0; i < 4; ++i) p.seen[4 + i] = s[i];
  dev::cp_async_wait<0>();  // every committed group; the uncommitted copy is in none
  for (int i = 0; i < 4; ++i) p.seen[8 + i] = s[i];
  dev::cp_async_wait_all();  // commit + wait: now the last copy lands too
  p.seen[12] = s[3];
}

TEST(EmuCpAsync, WaitGroupLeavesTheNewestGroupsInFlight) {
  const std::uint32_t src[4] = {11, 22, 33, 44};
  std::uint32_t seen[13];
  const auto r =
      DECODEBENCH_LAUNCH(wait_group_kernel, dim3(1), dim3(1), 0, nullptr, (GroupParams{src, seen}));
  ASSERT_TRUE(r.ok()) << r.message;
  const std::uint32_t P = kPoison;
  const std::uint32_t expect[13] = {11, P, P, P, 11, 22, P, P, 11, 22, 33, P, 44};
  for (int i = 0; i < 13; ++i) EXPECT_EQ(seen[i], expect[i]) << "snapshot word " << i;
}

struct MisuseParams {
  int which;
  unsigned char* global;
};

__global__ void misuse_kernel(const __grid_constant__ MisuseParams p) {
  DECODEBENCH_SHARED(unsigned char, s, 64);
  switch (p.which) {
    case 0: dev::cp_async<16>(s + 4, p.global, 16); break;          // misaligned destination
    case 1: dev::cp_async<16>(p.global, p.global + 16, 16); break;  // destination not shared
    case 2: (void)dev::ld_global_nc_v4(p.global + 8); break;        // misaligned 16-byte load
  }
}

TEST(EmuCpAsync, MisuseIsReported) {
  alignas(16) unsigned char global[64] = {};
  const char* expect[] = {"not 16-byte aligned", "not inside this block's shared memory",
                          "ld_global_nc_v4: address"};
  for (int which = 0; which < 3; ++which) {
    const auto r = DECODEBENCH_LAUNCH(misuse_kernel, dim3(1), dim3(1), 0, nullptr,
                                      (MisuseParams{which, global}));
    ASSERT_FALSE(r.ok()) << which;
    EXPECT_NE(r.message.find(expect[which]), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("misuse_kernel"), std::string::npos) << r.message;
  }
}

// --- atomics ----------------------------------------------------------------------------------

struct AtomicParams {
  int* i;       // [4]: add, max, min, exch
  unsigned* u;  // [2]: add, cas counter
  float* f;     // [1]
  unsigned long long* ull;
};

__global__ void atomic_kernel(const __grid_constant__ AtomicParams p) {
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  atomicAdd(&p.i[0], 1);
  atomicMax(&p.i[1], t);
  atomicMin(&p.i[2], -t);
  atomicExch(&p.i[3], 5);
  atomicAdd(&p.u[0], 2u);
  unsigned old = atomicAdd(&p.u[1], 0u);  // an atomic read (a plain one would race)
  for (;;) {                              // a CAS loop, as kernels write them
    const unsigned seen = atomicCAS(&p.u[1], old, old + 3);
    if (seen == old) break;
    old = seen;
  }
  atomicAdd(p.f, 0.5f);
  atomicAdd(p.ull, 1ull << 33);
}

TEST(EmuAtomics, ManyThreadsManyBlocks) {
  int i[4] = {0, -1, 0, 0};
  unsigned u[2] = {0, 0};
  float f = 0;
  unsigned long long ull = 0;
  const auto r = DECODEBENCH_LAUNCH(atomic_kernel, dim3(3), dim3(96), 0, nullptr,
                                    (AtomicParams{i, u, &f, &ull}));
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(i[0], 288);
  EXPECT_EQ(i[1], 287);
  EXPECT_EQ(i[2], -287);
  EXPECT_EQ(i[3], 5);
  EXPECT_EQ(u[0], 576u);
  EXPECT_EQ(u[1], 864u);
  EXPECT_EQ(f, 144.f);
  EXPECT_EQ(ull, 288ull << 33);
}

// --- indices and launch configuration ---------------------------------------------------------

struct IndexParams {
  int* hits;  // one per (block, thread) linear id
};

__global__ void index_kernel(const __grid_constant__ IndexParams p) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  atomicAdd(&p.hits[block * threads + thread],
            1 + static_cast<int>(threadIdx.z * 100 + blockIdx.z * 10000));
}

TEST(EmuLaunch, ThreeDimensionalGridsAndBlocksVisitEveryThreadOnce) {
  const dim3 grid(2, 3, 2), block(4, 2, 3);
  std::vector<int> hits(12 * 24, 0);
  const auto r =
      DECODEBENCH_LAUNCH(index_kernel, grid, block, 0, nullptr, IndexParams{hits.data()});
  ASSERT_TRUE(r.ok()) << r.message;
  for (int b = 0; b < 12; ++b) {
    for (int t = 0; t < 24; ++t) {
      const int tz = t / 8, bz = b / 6;
      EXPECT_EQ(hits[static_cast<std::size_t>(b * 24 + t)], 1 + tz * 100 + bz * 10000)
          << b << " " << t;
    }
  }
}

TEST(EmuLaunch, BadConfigurationsFailLikeCuda) {
  std::vector<int> hits(4096);
  const IndexParams p{hits.data()};
  const auto too_many = DECODEBENCH_LAUNCH(index_kernel, dim3(1), dim3(1025), 0, nullptr, p);
  EXPECT_FALSE(too_many.ok());
  EXPECT_NE(too_many.message.find("index_kernel launch failed: invalid configuration"),
            std::string::npos)
      << too_many.message;
  const auto empty_grid = DECODEBENCH_LAUNCH(index_kernel, dim3(0), dim3(32), 0, nullptr, p);
  EXPECT_FALSE(empty_grid.ok());
  const auto big_smem = DECODEBENCH_LAUNCH(index_kernel, dim3(1), dim3(32), 300 * 1024, nullptr, p);
  EXPECT_FALSE(big_smem.ok());
  EXPECT_NE(big_smem.message.find("dynamic shared memory"), std::string::npos) << big_smem.message;
}

struct ThrowParams {
  int unused;
};
__global__ void throwing_kernel(const __grid_constant__ ThrowParams) {
  if (threadIdx.x == 5) throw std::runtime_error("boom");
  __syncthreads();  // the others must be unwound, not left waiting for thread 5
}

TEST(EmuLaunch, ExceptionInOneThreadFailsTheLaunchAndUnwindsTheRest) {
  const auto r = DECODEBENCH_LAUNCH(throwing_kernel, dim3(2), dim3(64), 0, nullptr, ThrowParams{});
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.message.find("boom"), std::string::npos) << r.message;
  // The pool is healthy afterwards.
  std::vector<int> out(128, -1);
  const auto again = DECODEBENCH_LAUNCH(early_exit_kernel, dim3(1), dim3(128), 0, nullptr,
                                        (EarlyExitParams{128, out.data()}));
  EXPECT_TRUE(again.ok()) << again.message;
  EXPECT_EQ(out[0], 3);
}

TEST(EmuLaunch, IndicesOutsideAKernelAreAnError) { EXPECT_THROW((void)threadIdx.x, emu::EmuError); }

}  // namespace
}  // namespace decodebench
