// A fixed pool of worker threads that split a loop's range into chunks; the calling thread works too. It knows
// nothing of what runs on it: clients that keep buffers per thread (the GEMM's packing buffers, the kernels'
// scratch) hand it hooks, so that every thread reserves what any thread needed and a steady-state run allocates
// nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace ctxkit::cpu {

// A client's per-thread buffers. Any hook may be null.
struct ThreadScratchHooks {
  // Runs on each worker as it starts (start-up allocations land at pool creation, not in some later run).
  void (*start)() = nullptr;
  // Runs on each thread that took part in a loop, after it: raises process-wide marks to this thread's buffer
  // capacities.
  void (*note)() = nullptr;
  // A count that changes whenever a mark rose.
  uint64_t (*epoch)() = nullptr;
  // Reserves this thread's buffers up to the marks; run on every thread of the pool when the epoch moved.
  void (*reserve)() = nullptr;
};

// Runs `body(begin, end)` over [0, count) split across the pool's threads; serial with one thread.
class ThreadPool {
public:
  explicit ThreadPool(int threads, std::span<const ThreadScratchHooks> hooks = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  int threads() const { return threads_; }
  void parallelFor(size_t count, size_t minChunk, const std::function<void(size_t, size_t)>& body);

  // Marks a run in progress (null pool: nothing): while one is, idle workers keep polling for the next loop
  // instead of going to sleep between ops.
  class RunScope {
  public:
    explicit RunScope(ThreadPool* pool);
    ~RunScope();
    RunScope(const RunScope&) = delete;
    RunScope& operator=(const RunScope&) = delete;

  private:
    ThreadPool* pool_;
  };

private:
  struct Impl;
  int threads_;
  Impl* impl_;
};

}  // namespace ctxkit::cpu
