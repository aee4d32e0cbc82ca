// A fixed pool of worker threads that split a loop's range into chunks; the calling thread works too.
//
// Waking a sleeping thread costs tens of microseconds on a VM, more than many ops take, so between jobs a worker
// spins: for as long as a run is in progress (ThreadPool::RunScope, as ONNX Runtime's workers spin during Run),
// and for about kSpinNanos after, before it sleeps on the condition variable. A spinning worker joins the next
// op's loop at once. The job itself is published through atomics; the mutex and condition variable are only for
// workers that went to sleep.
//
// Spinning only pays while every thread has a core. On a machine with more runnable threads than cores a spinning
// worker burns its share of the scheduler's time, so it is off its core when a job comes, or is preempted halfway
// through a chunk while the caller waits for it: measured on 2 busy cores, 2 threads ran twice as long as 1. A
// thread that polls and sees the clock jump between two polls was descheduled; the pool then counts the machine as
// contended for a while (kContendedNanos), and its workers sleep right after a short spin instead. A woken sleeper
// is scheduled at once and runs its chunk through.
//
// Chunks are not handed out first come, first served: thread i (the caller is thread 0) starts on the i-th of
// `threads` contiguous runs of them and only then takes what the others left. An op's same part of its output then
// lands on the same core run after run, and a loop that follows one split the same way reads what its own core
// wrote: on a 2-core VM, a line another core last wrote costs a transfer between the cores, and first-come
// chunking made an Expand writing 15 MB (Faster R-CNN's RoI pooling) take 2.8 ms on two threads against 0.8 on
// one (0.54 with the runs); a pointwise Conv of 16 -> 64 channels onto 160x160 0.96 ms on one thread, 1.05 on two
// (0.59 with the runs).
#include "cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace ctxkit::cpu {

namespace {
// Set while a thread runs a chunk, so nested parallelFor calls run inline instead of deadlocking.
thread_local bool tInsideParallelFor = false;

// How long an idle worker keeps polling for the next job before it sleeps.
constexpr int64_t kSpinNanos = 200'000;
// The same on a contended machine.
constexpr int64_t kContendedSpinNanos = 5'000;
// A gap between two polls this long means the polling thread was descheduled (polls are microseconds apart).
constexpr int64_t kPreemptedNanos = 500'000;
// How long the machine counts as contended after a thread of the pool was seen descheduled.
constexpr int64_t kContendedNanos = 100'000'000;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

int64_t nowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Watches a polling loop for gaps that say its thread was descheduled.
class PreemptionWatch {
public:
  explicit PreemptionWatch(int64_t now) : last_(now) {}
  // Records a poll at `now`; true when the gap since the last one means the thread lost its core.
  bool poll(int64_t now) {
    const bool preempted = now - last_ > kPreemptedNanos;
    last_ = now;
    return preempted;
  }

private:
  int64_t last_;
};
}  // namespace

struct ThreadPool::Impl {
  std::vector<std::thread> workers;
  std::mutex submit;  // one job at a time; a concurrent caller runs its loop inline

  // The current job. Its plain fields are written before `open` is set and `generation` bumped (both sequentially
  // consistent), and a worker reads them only after it has counted itself in `busy` and then seen `open` still set:
  // the caller closes the job and waits for `busy` to drop to 0 before it returns or writes another job.
  const std::function<void(size_t, size_t)>* body = nullptr;
  size_t count = 0;
  size_t chunk = 1;
  size_t chunks = 0;
  // Each thread's share of the chunks, claimed front to back: its own first, then the others' leftovers.
  struct alignas(64) Share {
    std::atomic<size_t> next{0};
    size_t end = 0;
  };
  std::vector<Share> shares;
  std::atomic<uint64_t> generation{0};
  std::atomic<bool> open{false};  // workers may still join the job
  std::atomic<int> busy{0};       // workers that joined (or are about to back out of) the job
  std::atomic<bool> stopping{false};
  std::atomic<int> activeRuns{0};          // RunScopes alive: workers keep spinning
  std::atomic<int64_t> contendedUntil{0};  // until then (nowNanos) workers sleep soon instead of spinning

  void noteContention(int64_t now) { contendedUntil.store(now + kContendedNanos, std::memory_order_relaxed); }
  bool contended(int64_t now) const { return now < contendedUntil.load(std::memory_order_relaxed); }

  // Spins (then yields) until `done()`: for waits that end within microseconds, on threads that are running.
  template <typename F> void spinUntil(F&& done) {
    PreemptionWatch watch(nowNanos());
    for (int spins = 0; !done(); ++spins) {
      if (spins < 4096) cpuRelax();
      else std::this_thread::yield();
      if ((spins & 15) == 15)
        if (const int64_t now = nowNanos(); watch.poll(now)) noteContention(now);
    }
  }

  // The clients' per-thread buffers, behind their hooks.
  std::vector<ThreadScratchHooks> hooks;
  void startThread() const {
    for (const auto& h : hooks)
      if (h.start) h.start();
  }
  void note() const {
    for (const auto& h : hooks)
      if (h.note) h.note();
  }
  uint64_t epoch() const {
    uint64_t sum = 0;  // each client's count only grows, so the sum changes whenever one does
    for (const auto& h : hooks)
      if (h.epoch) sum += h.epoch();
    return sum;
  }
  void reserve() const {
    for (const auto& h : hooks)
      if (h.reserve) h.reserve();
  }

  // Scratch reservation: the caller raises `reserveWanted` to the clients' epoch it saw, and each worker reserves
  // its buffers and counts itself in `reserved`.
  std::atomic<uint64_t> reserveWanted{0};
  std::atomic<int> reserved{0};
  uint64_t reservedEpoch = 0;  // the epoch every thread has reserved for (the caller's, under `submit`)

  // Sleeping workers: `sleepers` is raised under `mutex` before a worker waits, so a caller that publishes a job
  // and then reads 0 knows every worker will see the job before it sleeps.
  std::mutex mutex;
  std::condition_variable wake;
  std::condition_variable started;
  std::atomic<int> sleepers{0};
  int startedWorkers = 0;  // workers past their start-up (scratch reserved); the constructor waits for all

  // Hands out the chunks: thread i's share is the i-th of `threads` contiguous runs of them.
  void shareChunks() {
    const size_t n = shares.size();
    for (size_t i = 0; i < n; ++i) {
      shares[i].next.store(chunks * i / n, std::memory_order_relaxed);
      shares[i].end = chunks * (i + 1) / n;
    }
  }

  // Claims and runs chunks until none are left: those of thread `self`'s share first, then the other shares' (a
  // thread that came late or was slowed leaves its rest to whoever is free).
  void drain(size_t self, const std::function<void(size_t, size_t)>& fn) {
    const size_t n = shares.size();
    for (size_t k = 0; k < n; ++k) {
      Share& share = shares[(self + k) % n];
      for (;;) {
        const size_t c = share.next.fetch_add(1, std::memory_order_relaxed);
        if (c >= share.end) break;
        const size_t begin = c * chunk;
        fn(begin, std::min(count, begin + chunk));
      }
    }
  }

  // Work for a worker that has seen job `seen` and reserved scratch for epoch `reservedFor`.
  bool workFor(uint64_t seen, uint64_t reservedFor) const {
    return (open.load() && generation.load() != seen) || reserveWanted.load() != reservedFor;
  }

  // Waits for work (spinning first, then asleep); false when the pool stops.
  bool waitForWork(uint64_t seen, uint64_t reservedFor) {
    const int64_t start = nowNanos();
    PreemptionWatch watch(start);
    int64_t until = start + kSpinNanos;
    for (int spins = 0;; ++spins) {
      if (stopping.load(std::memory_order_relaxed)) return false;
      if (workFor(seen, reservedFor)) return true;
      if ((spins & 15) == 15) {
        const int64_t now = nowNanos();
        if (watch.poll(now)) noteContention(now);
        if (contended(now)) {
          if (now > start + kContendedSpinNanos) break;
        } else if (activeRuns.load(std::memory_order_relaxed) > 0) {
          until = now + kSpinNanos;
        } else if (now > until) {
          break;
        }
        // Between the ops of a long run, give a busy machine's other threads a turn now and then.
        if ((spins & 0xffff) == 0xffff) std::this_thread::yield();
      }
      cpuRelax();
      if (spins > 2048)  // idle for a while: poll more slowly, leaving the core's resources to the caller
        for (int k = 0; k < 15; ++k) cpuRelax();
    }
    std::unique_lock<std::mutex> lock(mutex);
    sleepers.fetch_add(1);
    wake.wait(lock, [&] { return stopping.load() || workFor(seen, reservedFor); });
    sleepers.fetch_sub(1);
    return !stopping.load();
  }

  void wakeSleepers() {
    if (sleepers.load() > 0) {
      { std::lock_guard<std::mutex> lock(mutex); }
      wake.notify_all();
    }
  }

  // Called by the caller after a job: when a thread's scratch grew during it, every thread reserves up to the new
  // marks before the loop returns, so that no later run grows scratch on whichever thread meets the size first.
  void reserveScratchEverywhere() {
    const uint64_t now = epoch();
    if (now == reservedEpoch) return;
    reserve();
    reserved.store(0);
    reserveWanted.store(now);
    wakeSleepers();
    const int workerCount = static_cast<int>(workers.size());
    spinUntil([&] { return reserved.load() == workerCount; });
    reservedEpoch = now;
  }

  void workerLoop(size_t self) {
    tInsideParallelFor = true;
    startThread();  // else a worker's first use of a client's buffers, in whichever run it comes, would allocate
    {
      std::lock_guard<std::mutex> lock(mutex);
      ++startedWorkers;
    }
    started.notify_all();
    uint64_t seen = 0, reservedFor = 0;
    while (waitForWork(seen, reservedFor)) {
      if (const uint64_t wanted = reserveWanted.load(); wanted != reservedFor) {
        reserve();
        reservedFor = wanted;
        reserved.fetch_add(1);
        continue;
      }
      seen = generation.load();
      busy.fetch_add(1);
      // The caller may have closed this job since: then back out without touching it. (If it has opened another
      // already, helping with that one is as good.)
      if (open.load()) {
        drain(self, *body);
        note();
      }
      busy.fetch_sub(1);
    }
  }
};

ThreadPool::ThreadPool(int threads, std::span<const ThreadScratchHooks> hooks) : threads_(threads), impl_(new Impl) {
  impl_->hooks.assign(hooks.begin(), hooks.end());
  impl_->startThread();  // the creating thread usually runs the loops too: its start-up lands here, not in a run
  if (threads_ <= 0) threads_ = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  impl_->shares = std::vector<Impl::Share>(static_cast<size_t>(threads_));
  for (int i = 1; i < threads_; ++i)
    impl_->workers.emplace_back([this, i] { impl_->workerLoop(static_cast<size_t>(i)); });
  // Start-up allocations land here, at load, not in whichever run a worker happens to get scheduled.
  std::unique_lock<std::mutex> lock(impl_->mutex);
  impl_->started.wait(lock, [&] { return impl_->startedWorkers == threads_ - 1; });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping.store(true);
  }
  impl_->wake.notify_all();
  for (auto& t : impl_->workers) t.join();
  delete impl_;
}

ThreadPool::RunScope::RunScope(ThreadPool* pool) : pool_(pool && pool->threads() > 1 ? pool : nullptr) {
  if (pool_) pool_->impl_->activeRuns.fetch_add(1, std::memory_order_relaxed);
}

ThreadPool::RunScope::~RunScope() {
  if (pool_) pool_->impl_->activeRuns.fetch_sub(1, std::memory_order_relaxed);
}

void ThreadPool::parallelFor(size_t count, size_t minChunk, const std::function<void(size_t, size_t)>& body) {
  if (count == 0) return;
  minChunk = std::max<size_t>(minChunk, 1);
  if (threads_ <= 1 || count <= minChunk || tInsideParallelFor) {
    body(0, count);
    return;
  }
  std::unique_lock<std::mutex> submitLock(impl_->submit, std::try_to_lock);
  if (!submitLock.owns_lock()) {
    body(0, count);
    return;
  }
  // A few chunks per thread balances uneven work without much overhead.
  size_t target = static_cast<size_t>(threads_) * 4;
  size_t chunk = std::max(minChunk, (count + target - 1) / target);
  Impl& s = *impl_;
  s.body = &body;
  s.count = count;
  s.chunk = chunk;
  s.chunks = (count + chunk - 1) / chunk;
  s.shareChunks();
  s.open.store(true);
  s.generation.fetch_add(1);
  s.wakeSleepers();
  tInsideParallelFor = true;
  s.drain(0, body);
  tInsideParallelFor = false;
  s.note();
  // Late workers back out once the job is closed; those inside finish the chunks they claimed.
  s.open.store(false);
  s.spinUntil([&] { return s.busy.load() == 0; });
  s.body = nullptr;
  s.reserveScratchEverywhere();
}

}  // namespace ctxkit::cpu
