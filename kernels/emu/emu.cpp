// The SIMT emulator's runtime: thread pool, block execution, barriers, warp exchange, shared
// memory, cp.async queues, fault detection. See README.md in this directory for the model.
//
// Synchronization discipline (why ThreadSanitizer results mean something): every
// happens-before edge between emulated threads comes from an std::atomic operation that CUDA
// would also order (a barrier phase, a warp exchange, a kernel atomic). Sleeping uses the raw
// futex system call, which TSan does not model, instead of std::atomic::wait, whose shared
// waiter bookkeeping would add edges between unrelated threads and hide races. No mutex is held
// while kernel code runs, except once per (block, static shared array) the first time a kernel
// declares an array whose size the emulator has not yet learned.
#include "emu/emu.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

namespace decodebench::emu {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxThreadsPerBlock = 1024;
constexpr std::size_t kMaxStaticSmem = 48 * 1024;     // CUDA's static __shared__ limit
constexpr std::size_t kMaxSmemPerBlock = 227 * 1024;  // sm_90 opt-in limit per block
constexpr unsigned char kPoisonByte = 0xFF;           // 0xFFFFFFFF is a NaN
constexpr std::uint32_t kPoisonWord = 0xFFFFFFFFu;    // what a shuffle from a dead lane reads
constexpr int kSpinBeforeSleep = 64;

// --- futex ------------------------------------------------------------------------------------
static_assert(sizeof(std::atomic<std::uint32_t>) == 4, "futex needs a plain 32-bit word");

void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                const timespec* timeout = nullptr) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, timeout,
          nullptr, 0);
}
void futex_wake_all(std::atomic<std::uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT32_MAX,
          nullptr, nullptr, 0);
}

// Unwinds an emulated thread after its block was cancelled (not an std::exception, so kernel
// code cannot swallow it by catching std::exception).
struct Cancelled {};

std::string site_text(const char* file, unsigned line) {
  std::string f = file ? file : "?";
  // Trim the path to the part under the repository (kernels/..., tests/...).
  for (const char* root : {"/kernels/", "/tests/"}) {
    const auto pos = f.rfind(root);
    if (pos != std::string::npos) {
      f = f.substr(pos + 1);
      break;
    }
  }
  return f + ":" + std::to_string(line);
}

std::string dim_text(uint3 d) {
  char text[48];
  std::snprintf(text, sizeof text, "(%u,%u,%u)", d.x, d.y, d.z);
  return text;
}

// "0-63, 96, 100-127"
std::string ranges_text(const std::vector<int>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    char range[32];
    if (j > i) {
      std::snprintf(range, sizeof range, "%s%d-%d", s.empty() ? "" : ", ", ids[i], ids[j]);
    } else {
      std::snprintf(range, sizeof range, "%s%d", s.empty() ? "" : ", ", ids[i]);
    }
    s += range;
    i = j + 1;
  }
  return s;
}

// --- barriers ---------------------------------------------------------------------------------

// What a member recorded when it arrived at a barrier phase.
struct Arrival {
  std::uint32_t phase = ~0u;
  const char* op = nullptr;  // "__syncthreads", "__shfl_xor_sync", ...
  const char* file = nullptr;
  unsigned line = 0;
  int kind = 0;       // warp ops: which exchange (must agree across the warp)
  unsigned mask = 0;  // warp ops: member mask
};

// A reusable, cancellable barrier over a fixed set of members with arrive-and-drop. `counts`
// packs the live members (high half) and the arrivals of the current phase (low half) so an
// arrival and a drop agree on who completes the phase. The completer checks the arrivals
// (call sites, masks), then publishes the next phase with a release store: every member's
// writes before arriving happen-before every member's reads after the phase.
struct Barrier {
  std::atomic<std::uint64_t> counts{0};
  std::atomic<std::uint32_t> phase{0};
  std::vector<Arrival> arrivals;  // [members], each written only by its member before arriving

  void reset(int members, int live) {
    counts.store(static_cast<std::uint64_t>(live) << 32, std::memory_order_relaxed);
    phase.store(0, std::memory_order_relaxed);
    arrivals.assign(static_cast<std::size_t>(members), Arrival{});
  }
};

struct BlockRun;
struct ThreadCtx;

// --- per-thread and per-block state -----------------------------------------------------------

struct PendingCopy {
  void* dst;
  const void* src;
  int bytes;
  int src_bytes;
};

// One thread's cp.async queue: copies in issue order, and where each committed group ends.
struct AsyncQueue {
  std::vector<PendingCopy> copies;
  std::vector<std::size_t> group_ends;  // copies[..group_ends[g]) belong to groups <= g
  std::size_t performed = 0;            // copies[0, performed) have landed
  std::size_t groups_landed = 0;

  void clear() {
    copies.clear();
    group_ends.clear();
    performed = 0;
    groups_landed = 0;
  }
};

struct Warp {
  Barrier barrier;
  std::uint32_t slots[2][32];  // double-buffered exchange: a lane writes slots[phase & 1][lane]
  std::uint32_t gather[2][32][kWarpGatherMaxWords];  // the same for warp_gather's wider payloads
  std::uint32_t arrived[2] = {0, 0};  // lanes that took part in the phase (written by completer)
};

struct ThreadCtx {
  ThreadIndices indices{};
  int tid = 0;
  int warp = 0;
  int lane = 0;
  BlockRun* block = nullptr;
  std::uint32_t warp_phase = 0;  // warp phases this lane completed: selects the exchange buffer
  AsyncQueue async;
  // Where the thread sleeps, for reports only (relaxed; a torn read only garbles a message).
  std::atomic<const char*> wait_op{nullptr};
  std::atomic<const char*> wait_file{nullptr};
  std::atomic<unsigned> wait_line{0};
  // The barrier phase the thread sleeps on: it is blocked only while that phase is current
  // (a woken thread that has not run yet still has wait_op set).
  std::atomic<const std::atomic<std::uint32_t>*> wait_word{nullptr};
  std::atomic<std::uint32_t> wait_value{0};
};

thread_local ThreadCtx* t_ctx = nullptr;

struct SharedAlloc {
  const void* key;
  std::size_t bytes;
  const char* name;
  unsigned char* ptr;
};

struct AlignedDelete {
  void operator()(unsigned char* p) const { ::operator delete[](p, std::align_val_t{16}); }
};
using SmemBuffer = std::unique_ptr<unsigned char[], AlignedDelete>;

SmemBuffer allocate_poisoned(std::size_t bytes) {
  // Exact size, so AddressSanitizer reports the first byte past the array.
  SmemBuffer buf(static_cast<unsigned char*>(::operator new[](bytes, std::align_val_t{16})));
  std::memset(buf.get(), kPoisonByte, bytes);
  return buf;
}

struct LaunchInfo {
  const char* kernel_name;
  const void* kernel_key;
  dim3 grid;
  dim3 block;
  std::size_t dynamic_smem;
  void (*body)(const void*);
  const void* closure;
};

struct SiteInfo {
  const void* key;
  std::size_t bytes;
  const char* name;
};

struct BlockRun {
  const LaunchInfo* launch = nullptr;
  uint3 block_idx{};
  int num_threads = 0;
  std::unique_ptr<ThreadCtx[]> threads;
  Barrier block_barrier;
  std::unique_ptr<Warp[]> warps;
  int num_warps = 0;

  // Shared memory. `known` is built before the threads start and never changes during the
  // block (read without synchronization); sites not yet learned go to `discovered`.
  std::vector<SharedAlloc> known;
  std::vector<SmemBuffer> buffers;
  std::mutex discover_mutex;
  std::vector<SharedAlloc> discovered;
  std::size_t static_bytes = 0;  // guarded by discover_mutex once threads run
  SmemBuffer dynamic_smem;

  std::atomic<bool> cancelled{false};
  std::atomic<std::uint64_t> progress{0};
  std::atomic<std::uint32_t> done{0};  // threads finished; the coordinator sleeps on it
  std::atomic<bool> error_claimed{false};
  std::atomic<bool> error_ready{false};
  std::string error;

  std::string where() const {
    return std::string("kernel ") + launch->kernel_name + " block " + dim_text(block_idx);
  }

  // First error wins; the block is cancelled so every thread unwinds.
  void fail(const std::string& message) {
    if (!error_claimed.exchange(true)) {
      error = message;
      error_ready.store(true, std::memory_order_release);
    }
    cancel();
  }

  void cancel() {
    cancelled.store(true);  // seq_cst: ordered before the phase bumps below
    auto wake = [](Barrier& b) {
      b.phase.fetch_add(1);
      futex_wake_all(b.phase);
    };
    wake(block_barrier);
    for (int w = 0; w < num_warps; ++w) wake(warps[w].barrier);
  }

  bool is_shared(const void* p, std::size_t bytes) const;
};

ThreadCtx& current(const char* what) {
  if (t_ctx == nullptr) detail::outside_kernel(what);
  if (t_ctx->block->cancelled.load(std::memory_order_relaxed)) throw Cancelled{};
  return *t_ctx;
}

// The completer's check of one phase. Returns an error message, or empty when consistent.
using PhaseCheck = std::string (*)(BlockRun&, Barrier&, std::uint32_t phase, int group);

void complete_phase(BlockRun& blk, Barrier& b, std::uint32_t arrived, std::uint32_t phase,
                    PhaseCheck check, int group) {
  std::string problem = check(blk, b, phase, group);
  if (!problem.empty()) {
    blk.fail(problem);  // wakes everyone with the cancel flag set
    return;
  }
  b.counts.fetch_sub(arrived, std::memory_order_acq_rel);
  blk.progress.fetch_add(1, std::memory_order_relaxed);
  b.phase.fetch_add(1, std::memory_order_release);
  futex_wake_all(b.phase);
}

void wait_for_phase(BlockRun& blk, Barrier& b, std::uint32_t phase, ThreadCtx& self,
                    const Arrival& where) {
  for (int i = 0; i < kSpinBeforeSleep; ++i) {
    if (b.phase.load(std::memory_order_acquire) != phase) break;
  }
  bool announced = false;
  for (;;) {
    const std::uint32_t now = b.phase.load(std::memory_order_acquire);
    if (blk.cancelled.load()) break;  // seq_cst pairs with cancel(): no lost wake-up
    if (now != phase) break;
    if (!announced) {
      self.wait_word.store(&b.phase, std::memory_order_relaxed);
      self.wait_value.store(phase, std::memory_order_relaxed);
      self.wait_op.store(where.op, std::memory_order_relaxed);
      self.wait_file.store(where.file, std::memory_order_relaxed);
      self.wait_line.store(where.line, std::memory_order_relaxed);
      announced = true;
    }
    futex_wait(b.phase, phase);
  }
  if (announced) self.wait_op.store(nullptr, std::memory_order_relaxed);
  if (blk.cancelled.load()) throw Cancelled{};
}

// Arrives at `b` as `member` and waits for the phase to complete.
void arrive_and_wait(BlockRun& blk, Barrier& b, int member, Arrival arrival, ThreadCtx& self,
                     PhaseCheck check, int group) {
  const std::uint32_t phase = b.phase.load(std::memory_order_acquire);
  arrival.phase = phase;
  b.arrivals[static_cast<std::size_t>(member)] = arrival;
  blk.progress.fetch_add(1, std::memory_order_relaxed);
  const std::uint64_t old = b.counts.fetch_add(1, std::memory_order_acq_rel);
  const auto arrived = static_cast<std::uint32_t>(old & 0xffffffffu) + 1;
  const auto live = static_cast<std::uint32_t>(old >> 32);
  if (arrived == live) {
    complete_phase(blk, b, arrived, phase, check, group);
    if (blk.cancelled.load()) throw Cancelled{};
    return;
  }
  wait_for_phase(blk, b, phase, self, arrival);
}

// A member leaves for good (its thread returned). If everyone else already arrived, it
// completes their phase: a thread that exits early does not block the rest (as on NVIDIA GPUs).
void drop(BlockRun& blk, Barrier& b, PhaseCheck check, int group) {
  const std::uint64_t old = b.counts.fetch_sub(std::uint64_t{1} << 32, std::memory_order_acq_rel);
  const auto arrived = static_cast<std::uint32_t>(old & 0xffffffffu);
  const auto live = static_cast<std::uint32_t>(old >> 32) - 1;
  if (arrived > 0 && arrived == live) {
    complete_phase(blk, b, arrived, b.phase.load(std::memory_order_acquire), check, group);
  }
}

// __syncthreads: every arrival of a phase must come from the same call site.
std::string check_block_phase(BlockRun& blk, Barrier& b, std::uint32_t phase, int /*group*/) {
  const Arrival* first = nullptr;
  bool mismatch = false;
  for (const Arrival& a : b.arrivals) {
    if (a.phase != phase) continue;
    if (first == nullptr) {
      first = &a;
    } else if (a.line != first->line || std::strcmp(a.file, first->file) != 0) {
      mismatch = true;
      break;
    }
  }
  if (!mismatch) return {};
  // Group the threads by site for the report.
  std::map<std::string, std::vector<int>> by_site;
  for (std::size_t t = 0; t < b.arrivals.size(); ++t) {
    const Arrival& a = b.arrivals[t];
    if (a.phase == phase) by_site[site_text(a.file, a.line)].push_back(static_cast<int>(t));
  }
  std::string msg = blk.where() +
                    ": __syncthreads reached from different places in one barrier "
                    "phase (a barrier in divergent code):";
  for (const auto& [site, tids] : by_site) {
    msg += " threads " + ranges_text(tids) + " at " + site + ";";
  }
  msg.pop_back();
  return msg;
}

// Which warp exchange an arrival is (the lanes of one phase must agree).
enum WarpKind : int { kSync = 1, kShflIdx, kShflUp, kShflDown, kShflBfly, kBallot, kGather };

// Warp ops: every lane of a phase does the same kind of exchange, and its mask names every lane
// that took part (the emulator does not model concurrent sub-warp groups).
std::string check_warp_phase(BlockRun& blk, Barrier& b, std::uint32_t phase, int warp_index) {
  Warp& w = blk.warps[warp_index];
  std::uint32_t arrived = 0;
  const Arrival* first = nullptr;
  for (int lane = 0; lane < 32; ++lane) {
    const Arrival& a = b.arrivals[static_cast<std::size_t>(lane)];
    if (a.phase != phase) continue;
    arrived |= 1u << lane;
    if (first == nullptr) first = &a;
  }
  for (int lane = 0; lane < 32; ++lane) {
    const Arrival& a = b.arrivals[static_cast<std::size_t>(lane)];
    if (a.phase != phase) continue;
    const int thread = warp_index * 32 + lane;
    // warp_gather serves several operations: they must agree on which one (its name).
    if (a.kind != first->kind || (a.kind == kGather && std::strcmp(a.op, first->op) != 0)) {
      return blk.where() + ": warp " + std::to_string(warp_index) + " mixes " + first->op + " (" +
             site_text(first->file, first->line) + ") with " + a.op + " (" +
             site_text(a.file, a.line) + ", thread " + std::to_string(thread) +
             ") in one warp-synchronous step";
    }
    if ((a.mask & arrived) != arrived) {
      char mask_text[16];
      std::snprintf(mask_text, sizeof mask_text, "0x%08x", a.mask);
      return blk.where() + ": " + a.op + " at " + site_text(a.file, a.line) + " in thread " +
             std::to_string(thread) + " has mask " + mask_text +
             ", which leaves out lanes that are live and waiting; sub-warp masks are not "
             "emulated (use the full mask of the live lanes)";
    }
  }
  w.arrived[phase & 1] = arrived;
  return {};
}

bool BlockRun::is_shared(const void* p, std::size_t bytes) const {
  const auto* c = static_cast<const unsigned char*>(p);
  auto inside = [&](const unsigned char* base, std::size_t size) {
    return base != nullptr && c >= base && c + bytes <= base + size;
  };
  if (inside(dynamic_smem.get(), launch->dynamic_smem)) return true;
  for (const SharedAlloc& a : known) {
    if (inside(a.ptr, a.bytes)) return true;
  }
  return false;
}

// --- warp exchange ----------------------------------------------------------------------------

const char* shfl_name(ShflMode mode) {
  switch (mode) {
    case ShflMode::idx: return "__shfl_sync";
    case ShflMode::up: return "__shfl_up_sync";
    case ShflMode::down: return "__shfl_down_sync";
    case ShflMode::bfly: return "__shfl_xor_sync";
  }
  return "shfl";
}

// One warp-synchronous step: publish `value`, wait for the warp, return the buffer index.
int warp_step(ThreadCtx& self, int kind, const char* op, unsigned mask, std::uint32_t value,
              std::source_location site) {
  BlockRun& blk = *self.block;
  Warp& w = blk.warps[self.warp];
  const int buf = static_cast<int>(self.warp_phase & 1);
  w.slots[buf][self.lane] = value;
  Arrival a;
  a.op = op;
  a.file = site.file_name();
  a.line = site.line();
  a.kind = kind;
  a.mask = mask;
  arrive_and_wait(blk, w.barrier, self.lane, a, self, check_warp_phase, self.warp);
  ++self.warp_phase;
  return buf;
}

// --- the thread pool --------------------------------------------------------------------------

void run_thread(BlockRun& blk, int tid);

struct Worker {
  std::thread thread;
  std::atomic<std::uint32_t> go{0};  // bumped by the coordinator to hand over a block
  std::shared_ptr<BlockRun> run;     // written before `go` is bumped
  int tid = 0;
};

class Pool {
 public:
  ~Pool() {
    shutdown_.store(true);
    for (auto& w : workers_) {
      w->go.fetch_add(1, std::memory_order_release);
      futex_wake_all(w->go);
    }
    for (auto& w : workers_) w->thread.join();
  }

  void ensure(int n) {
    while (static_cast<int>(workers_.size()) < n) {
      auto w = std::make_unique<Worker>();
      w->tid = static_cast<int>(workers_.size());
      Worker* raw = w.get();
      w->thread = std::thread([this, raw] { loop(*raw); });
      workers_.push_back(std::move(w));
    }
  }

  void start(const std::shared_ptr<BlockRun>& run) {
    for (int t = 0; t < run->num_threads; ++t) {
      Worker& w = *workers_[static_cast<std::size_t>(t)];
      w.run = run;
      w.go.fetch_add(1, std::memory_order_release);
      futex_wake_all(w.go);
    }
  }

  // Threads stuck in kernel code that cannot be unwound (a loop that never reaches a primitive)
  // are left behind; fresh workers take their places.
  void abandon(int n) {
    for (int t = 0; t < n && t < static_cast<int>(workers_.size()); ++t) {
      workers_[static_cast<std::size_t>(t)]->thread.detach();
      workers_[static_cast<std::size_t>(t)].release();  // the stuck thread still uses it
    }
    workers_.erase(workers_.begin(), workers_.begin() + std::min<std::size_t>(n, workers_.size()));
    for (std::size_t i = 0; i < workers_.size(); ++i) workers_[i]->tid = static_cast<int>(i);
    // Renumbering live workers is safe: they are idle (the previous block has finished).
  }

 private:
  void loop(Worker& self) {
    std::uint32_t seen = 0;
    for (;;) {
      std::uint32_t now = self.go.load(std::memory_order_acquire);
      for (int i = 0; now == seen && i < kSpinBeforeSleep; ++i) {
        now = self.go.load(std::memory_order_acquire);
      }
      while (now == seen) {
        futex_wait(self.go, seen);
        now = self.go.load(std::memory_order_acquire);
      }
      seen = now;
      if (shutdown_.load()) return;
      std::shared_ptr<BlockRun> run = std::move(self.run);
      run_thread(*run, self.tid);
    }
  }

  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> shutdown_{false};
};

Pool& pool() {
  static Pool instance;
  return instance;
}

// --- one emulated thread ----------------------------------------------------------------------

void run_thread(BlockRun& blk, int tid) {
  ThreadCtx& self = blk.threads[tid];
  t_ctx = &self;
  detail::tls_indices = &self.indices;
  try {
    blk.launch->body(blk.launch->closure);
  } catch (const Cancelled&) {
  } catch (const std::exception& e) {
    blk.fail(blk.where() + " thread " + dim_text(self.indices.thread_idx) + ": " + e.what());
  } catch (...) {
    blk.fail(blk.where() + " thread " + dim_text(self.indices.thread_idx) +
             ": unknown exception escaped the kernel");
  }
  // Copies never waited for are dropped: no correct kernel can observe them.
  self.async.clear();
  if (!blk.cancelled.load()) drop(blk, blk.warps[self.warp].barrier, check_warp_phase, self.warp);
  if (!blk.cancelled.load()) drop(blk, blk.block_barrier, check_block_phase, 0);
  blk.progress.fetch_add(1, std::memory_order_relaxed);
  t_ctx = nullptr;
  detail::tls_indices = nullptr;
  if (blk.done.fetch_add(1, std::memory_order_acq_rel) + 1 ==
      static_cast<std::uint32_t>(blk.num_threads)) {
    futex_wake_all(blk.done);
  }
}

// --- launch -----------------------------------------------------------------------------------

std::mutex& launch_mutex() {
  static std::mutex m;
  return m;
}

// Static shared arrays learned per kernel, so blocks after the first get them up front.
std::map<const void*, std::vector<SiteInfo>>& learned_sites() {
  static std::map<const void*, std::vector<SiteInfo>> sites;
  return sites;
}

// Lists where threads sleep. `blocked_count` gets the number of threads asleep on a phase
// that is still current (so they cannot run until some other thread acts).
std::string waiting_report(BlockRun& blk, int* blocked_count) {
  std::map<std::string, std::vector<int>> by_site;
  std::vector<int> running;
  int blocked = 0;
  for (int t = 0; t < blk.num_threads; ++t) {
    ThreadCtx& c = blk.threads[t];
    const char* op = c.wait_op.load(std::memory_order_relaxed);
    if (op != nullptr) {
      const std::atomic<std::uint32_t>* word = c.wait_word.load(std::memory_order_relaxed);
      if (word != nullptr &&
          word->load(std::memory_order_relaxed) == c.wait_value.load(std::memory_order_relaxed)) {
        ++blocked;
      }
      by_site[std::string(op) + " at " +
              site_text(c.wait_file.load(std::memory_order_relaxed),
                        c.wait_line.load(std::memory_order_relaxed))]
          .push_back(t);
    } else {
      running.push_back(t);
    }
  }
  if (blocked_count) *blocked_count = blocked;
  std::string s;
  for (const auto& [site, tids] : by_site)
    s += " threads " + ranges_text(tids) + " wait in " + site + ";";
  if (!running.empty())
    s += " threads " + ranges_text(running) + " are not waiting (running or exited);";
  if (!s.empty()) s.pop_back();
  return s;
}

int live_threads(BlockRun& blk) {
  return blk.num_threads - static_cast<int>(blk.done.load(std::memory_order_relaxed));
}

std::shared_ptr<BlockRun> make_block(const LaunchInfo& launch, uint3 block_idx) {
  auto blk = std::make_shared<BlockRun>();
  blk->launch = &launch;
  blk->block_idx = block_idx;
  const int n = static_cast<int>(launch.block.x * launch.block.y * launch.block.z);
  blk->num_threads = n;
  blk->threads = std::make_unique<ThreadCtx[]>(static_cast<std::size_t>(n));
  for (int t = 0; t < n; ++t) {
    ThreadCtx& c = blk->threads[t];
    c.tid = t;
    c.warp = t / 32;
    c.lane = t % 32;
    c.block = blk.get();
    c.indices.thread_idx = {t % launch.block.x, (t / launch.block.x) % launch.block.y,
                            t / (launch.block.x * launch.block.y)};
    c.indices.block_idx = block_idx;
    c.indices.block_dim = launch.block;
    c.indices.grid_dim = launch.grid;
  }
  blk->block_barrier.reset(n, n);
  blk->num_warps = (n + 31) / 32;
  blk->warps = std::make_unique<Warp[]>(static_cast<std::size_t>(blk->num_warps));
  for (int w = 0; w < blk->num_warps; ++w) {
    blk->warps[w].barrier.reset(32, std::min(32, n - 32 * w));
    std::memset(blk->warps[w].slots, kPoisonByte, sizeof blk->warps[w].slots);
  }
  // Shared memory, fresh and poisoned for every block.
  // A zero-byte dynamic area is still a distinct allocation: any access to it is an overrun.
  blk->dynamic_smem = allocate_poisoned(launch.dynamic_smem);
  auto it = learned_sites().find(launch.kernel_key);
  if (it != learned_sites().end()) {
    for (const SiteInfo& s : it->second) {
      blk->buffers.push_back(allocate_poisoned(s.bytes));
      blk->known.push_back({s.key, s.bytes, s.name, blk->buffers.back().get()});
      blk->static_bytes += s.bytes;
    }
  }
  return blk;
}

void run_block(const LaunchInfo& launch, uint3 block_idx) {
  std::shared_ptr<BlockRun> blk = make_block(launch, block_idx);
  const int n = blk->num_threads;
  Pool& p = pool();
  p.ensure(n);
  p.start(blk);

  const double timeout_s = no_progress_timeout_s();
  constexpr double kDeadlockConfirm_s = 1.0;  // all threads asleep and nothing moved this long
  std::uint64_t last_progress = blk->progress.load(std::memory_order_relaxed);
  auto last_change = Clock::now();
  bool cancelled_by_us = false;
  Clock::time_point cancel_time{};
  for (;;) {
    const std::uint32_t done = blk->done.load(std::memory_order_acquire);
    if (done == static_cast<std::uint32_t>(n)) break;
    timespec poll{0, 50'000'000};  // 50 ms
    futex_wait(blk->done, done, &poll);
    if (blk->done.load(std::memory_order_acquire) == static_cast<std::uint32_t>(n)) break;

    const auto now = Clock::now();
    if (cancelled_by_us || blk->cancelled.load()) {
      if (!cancelled_by_us) {
        cancelled_by_us = true;
        cancel_time = now;
      }
      if (now - cancel_time > std::chrono::seconds(5)) {
        // Threads that never reach a primitive again cannot be unwound.
        std::string report = waiting_report(*blk, nullptr);
        blk->fail("");  // no-op if an error is already recorded
        const std::string first =
            blk->error_ready.load(std::memory_order_acquire) ? blk->error : "";
        p.abandon(n);
        throw EmuError(first + (first.empty() ? "" : "; ") + blk->where() +
                       ": threads did not unwind after the block was cancelled (" + report +
                       "); they were abandoned");
      }
      continue;
    }
    const std::uint64_t progress = blk->progress.load(std::memory_order_relaxed);
    if (progress != last_progress) {
      last_progress = progress;
      last_change = now;
      continue;
    }
    const double idle_s = std::chrono::duration<double>(now - last_change).count();
    int blocked = 0;
    const std::string report = waiting_report(*blk, &blocked);
    const bool still = blk->progress.load(std::memory_order_relaxed) == progress;  // stable scan
    if (still && blocked == live_threads(*blk) && blocked > 0 && idle_s >= kDeadlockConfirm_s) {
      blk->fail(blk->where() +
                ": deadlock, every live thread waits and none can proceed:" + report);
    } else if (still && idle_s >= timeout_s) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", timeout_s);
      blk->fail(blk->where() + ": no progress for " + seconds +
                " s (DECODEBENCH_EMU_TIMEOUT_S):" + report);
    }
  }
  if (blk->error_ready.load(std::memory_order_acquire)) throw EmuError(blk->error);
  if (blk->cancelled.load()) throw EmuError(blk->where() + ": cancelled");

  // Learn the static shared arrays this block declared for the first time.
  if (!blk->discovered.empty()) {
    auto& sites = learned_sites()[launch.kernel_key];
    for (const SharedAlloc& a : blk->discovered) sites.push_back({a.key, a.bytes, a.name});
  }
}

}  // namespace

// --- public entry points ----------------------------------------------------------------------

namespace detail {
void outside_kernel(const char* what) {
  throw EmuError(std::string(what) + " used outside an emulated kernel");
}
void misaligned(const void* p, std::size_t alignment, const char* what) {
  char addr[32];
  std::snprintf(addr, sizeof addr, "%p", p);
  throw EmuError(std::string(what) + ": address " + addr + " is not " + std::to_string(alignment) +
                 "-byte aligned");
}
}  // namespace detail

double no_progress_timeout_s() {
  if (const char* env = std::getenv("DECODEBENCH_EMU_TIMEOUT_S")) {
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    if (end != env && v > 0) return v;
  }
  return 20.0;
}

void syncthreads(std::source_location site) {
  ThreadCtx& self = current("__syncthreads");
  Arrival a;
  a.op = "__syncthreads";
  a.file = site.file_name();
  a.line = site.line();
  arrive_and_wait(*self.block, self.block->block_barrier, self.tid, a, self, check_block_phase, 0);
}

void syncwarp(unsigned mask, std::source_location site) {
  ThreadCtx& self = current("__syncwarp");
  warp_step(self, kSync, "__syncwarp", mask, 0, site);
}

std::uint32_t shfl(ShflMode mode, unsigned mask, std::uint32_t value, int b, int width,
                   std::source_location site) {
  ThreadCtx& self = current(shfl_name(mode));
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    throw EmuError(std::string(shfl_name(mode)) + " at " +
                   site_text(site.file_name(), site.line()) + ": width " + std::to_string(width) +
                   " is not a power of two in [1, 32]");
  }
  static constexpr int kKind[] = {kShflIdx, kShflUp, kShflDown, kShflBfly};
  const int buf =
      warp_step(self, kKind[static_cast<int>(mode)], shfl_name(mode), mask, value, site);
  Warp& w = self.block->warps[self.warp];

  // PTX shfl.sync: CUDA passes c = ((32 - width) << 8) | (up ? 0 : 0x1f).
  const int lane = self.lane;
  const int segmask = 32 - width;                     // c[12:8]
  const int clamp = mode == ShflMode::up ? 0 : 0x1f;  // c[4:0]
  const int bval = b & 0x1f;
  const int max_lane = (lane & segmask) | (clamp & ~segmask);
  const int min_lane = lane & segmask;
  int j = lane;
  bool in_range = false;
  switch (mode) {
    case ShflMode::up:
      j = lane - bval;
      in_range = j >= max_lane;
      break;
    case ShflMode::down:
      j = lane + bval;
      in_range = j <= max_lane;
      break;
    case ShflMode::bfly:
      j = lane ^ bval;
      in_range = j <= max_lane;
      break;
    case ShflMode::idx:
      j = min_lane | (bval & ~segmask);
      in_range = j <= max_lane;
      break;
  }
  if (!in_range) j = lane;
  if (((w.arrived[buf] >> j) & 1u) == 0) return kPoisonWord;  // source lane exited or absent
  return w.slots[buf][j];
}

unsigned ballot(unsigned mask, bool predicate, std::source_location site) {
  ThreadCtx& self = current("__ballot_sync");
  const int buf = warp_step(self, kBallot, "__ballot_sync", mask, predicate ? 1u : 0u, site);
  const Warp& w = self.block->warps[self.warp];
  unsigned result = 0;
  for (int lane = 0; lane < 32; ++lane) {
    if (((w.arrived[buf] & mask) >> lane) & 1u) result |= (w.slots[buf][lane] & 1u) << lane;
  }
  return result;
}

void warp_gather(const char* op, const std::uint32_t* words, int count, std::uint32_t* out,
                 std::source_location site) {
  ThreadCtx& self = current(op);
  if (count < 1 || count > kWarpGatherMaxWords) {
    throw EmuError(std::string(op) + " at " + site_text(site.file_name(), site.line()) +
                   ": warp_gather moves 1 to " + std::to_string(kWarpGatherMaxWords) +
                   " words per lane, not " + std::to_string(count));
  }
  Warp& w = self.block->warps[self.warp];
  const int next = static_cast<int>(self.warp_phase & 1);  // the buffer warp_step will use
  std::memcpy(w.gather[next][self.lane], words,
              sizeof(std::uint32_t) * static_cast<std::size_t>(count));
  const int buf = warp_step(self, kGather, op, 0xffffffffu, 0, site);
  if (w.arrived[buf] != 0xffffffffu) {
    char lanes[16];
    std::snprintf(lanes, sizeof lanes, "0x%08x", w.arrived[buf]);
    throw EmuError(std::string(op) + " at " + site_text(site.file_name(), site.line()) +
                   " needs all 32 lanes of the warp; only the lanes of mask " + lanes +
                   " took part (the others exited or lie past the end of the block)");
  }
  for (int lane = 0; lane < 32; ++lane) {
    std::memcpy(out + static_cast<std::ptrdiff_t>(lane) * count, w.gather[buf][lane],
                sizeof(std::uint32_t) * static_cast<std::size_t>(count));
  }
}

void* static_shared(const void* site_key, std::size_t bytes, const char* name, const char* file,
                    int line) {
  ThreadCtx& self = current("DECODEBENCH_SHARED");
  BlockRun& blk = *self.block;
  for (const SharedAlloc& a : blk.known) {
    if (a.key == site_key) return a.ptr;
  }
  // First time this kernel declares this array: allocate it once per block.
  std::lock_guard lock(blk.discover_mutex);
  for (const SharedAlloc& a : blk.discovered) {
    if (a.key == site_key) return a.ptr;
  }
  if (blk.static_bytes + bytes > kMaxStaticSmem) {
    throw EmuError("DECODEBENCH_SHARED(" + std::string(name) + ") at " +
                   site_text(file, static_cast<unsigned>(line)) +
                   ": static shared memory would reach " +
                   std::to_string(blk.static_bytes + bytes) + " bytes; CUDA allows " +
                   std::to_string(kMaxStaticSmem) + " (use dynamic shared memory beyond that)");
  }
  blk.buffers.push_back(allocate_poisoned(bytes));
  blk.static_bytes += bytes;
  blk.discovered.push_back({site_key, bytes, name, blk.buffers.back().get()});
  return blk.discovered.back().ptr;
}

void* dynamic_shared() {
  ThreadCtx& self = current("DECODEBENCH_DYNAMIC_SHARED");
  return self.block->dynamic_smem.get();
}

void check_shared(const void* p, std::size_t bytes, const char* what) {
  ThreadCtx& self = current(what);
  BlockRun& blk = *self.block;
  if (blk.is_shared(p, bytes)) return;
  // Arrays learned during this block are not in `known`; check those under the lock.
  {
    std::lock_guard lock(blk.discover_mutex);
    const auto* c = static_cast<const unsigned char*>(p);
    for (const SharedAlloc& a : blk.discovered) {
      if (c >= a.ptr && c + bytes <= a.ptr + a.bytes) return;
    }
  }
  char addr[32];
  std::snprintf(addr, sizeof addr, "%p", p);
  throw EmuError(std::string(what) + ": " + std::to_string(bytes) + " bytes at " + addr +
                 " are not inside this block's shared memory");
}

void cp_async(void* smem, const void* gmem, int bytes, int src_bytes) {
  ThreadCtx& self = current("cp_async");
  check_aligned(smem, static_cast<std::size_t>(bytes), "cp_async shared destination");
  if (src_bytes > 0) check_aligned(gmem, static_cast<std::size_t>(bytes), "cp_async global source");
  check_shared(smem, static_cast<std::size_t>(bytes), "cp_async destination");
  self.async.copies.push_back({smem, gmem, bytes, src_bytes});
}

void cp_async_commit() {
  ThreadCtx& self = current("cp_async_commit");
  self.async.group_ends.push_back(self.async.copies.size());
}

void cp_async_wait(int pending_groups) {
  ThreadCtx& self = current("cp_async_wait");
  AsyncQueue& q = self.async;
  const std::size_t committed = q.group_ends.size();
  if (committed - q.groups_landed <= static_cast<std::size_t>(pending_groups)) return;
  const std::size_t last_group = committed - static_cast<std::size_t>(pending_groups);  // exclusive
  const std::size_t end = q.group_ends[last_group - 1];
  for (std::size_t i = q.performed; i < end; ++i) {
    const PendingCopy& c = q.copies[i];
    auto* dst = static_cast<unsigned char*>(c.dst);
    if (c.src_bytes > 0) std::memcpy(dst, c.src, static_cast<std::size_t>(c.src_bytes));
    std::memset(dst + c.src_bytes, 0, static_cast<std::size_t>(c.bytes - c.src_bytes));
  }
  q.performed = end;
  q.groups_landed = last_group;
  if (q.performed == q.copies.size()) q.clear();  // nothing left in flight: reuse the storage
}

void launch_erased(const char* kernel_name, const void* kernel_key, dim3 grid, dim3 block,
                   std::size_t dynamic_smem_bytes, void (*body)(const void*), const void* closure) {
  const std::string name = kernel_name;
  const unsigned long long threads = static_cast<unsigned long long>(block.x) * block.y * block.z;
  auto config_error = [&](const std::string& why) {
    return EmuError("kernel " + name + " launch failed: invalid configuration (" + why + ")");
  };
  if (threads == 0 || threads > kMaxThreadsPerBlock || block.x > 1024 || block.y > 1024 ||
      block.z > 64) {
    throw config_error("block " + dim_text({block.x, block.y, block.z}) +
                       "; CUDA allows at most 1024 threads, x,y <= 1024, z <= 64");
  }
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 ||
      grid.z > 65535) {
    throw config_error("grid " + dim_text({grid.x, grid.y, grid.z}) +
                       "; each dimension must be >= 1, x < 2^31, y,z <= 65535");
  }
  if (dynamic_smem_bytes > kMaxSmemPerBlock) {
    throw config_error(std::to_string(dynamic_smem_bytes) +
                       " bytes of dynamic shared memory; an sm_90 block can have at most " +
                       std::to_string(kMaxSmemPerBlock));
  }
  std::lock_guard lock(launch_mutex());
  const LaunchInfo launch{kernel_name, kernel_key, grid, block, dynamic_smem_bytes, body, closure};
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) run_block(launch, {x, y, z});
    }
  }
}

}  // namespace decodebench::emu
