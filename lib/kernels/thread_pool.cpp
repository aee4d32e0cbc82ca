// A fixed pool of worker threads that split a loop's range into chunks; the calling thread works too.
#include "kernels/gemm.h"
#include "kernels/kernels.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace ctxkit::kernels {

namespace {
// Set while a thread runs a chunk, so nested parallelFor calls run inline instead of deadlocking.
thread_local bool tInsideParallelFor = false;
}  // namespace

struct ThreadPool::Impl {
  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable wake;
  std::condition_variable done;
  std::mutex submit;  // one job at a time; a concurrent caller runs its loop inline

  // The current job, guarded by `mutex` except the atomic chunk counter.
  const std::function<void(size_t, size_t)>* body = nullptr;
  size_t count = 0;
  size_t chunk = 1;
  size_t chunks = 0;
  std::atomic<size_t> nextChunk{0};
  uint64_t generation = 0;
  bool open = false;    // workers may still join the job
  int busyWorkers = 0;  // workers inside the job
  bool stopping = false;
  int startedWorkers = 0;  // workers past their start-up (scratch reserved); the constructor waits for all

  // Claims and runs chunks until none are left.
  void drain(const std::function<void(size_t, size_t)>& fn) {
    for (;;) {
      size_t c = nextChunk.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks) return;
      size_t begin = c * chunk;
      size_t end = std::min(count, begin + chunk);
      fn(begin, end);
    }
  }

  void workerLoop() {
    tInsideParallelFor = true;
    reserveGemmScratch();  // else a worker's first GEMM, in whichever run it comes, would allocate
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex);
    ++startedWorkers;
    done.notify_all();
    for (;;) {
      wake.wait(lock, [&] { return stopping || (open && generation != seen); });
      if (stopping) return;
      seen = generation;
      const auto* fn = body;
      ++busyWorkers;
      lock.unlock();
      drain(*fn);
      lock.lock();
      if (--busyWorkers == 0) done.notify_all();
    }
  }
};

ThreadPool::ThreadPool(int threads) : threads_(threads), impl_(new Impl) {
  if (threads_ <= 0) threads_ = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads_; ++i) impl_->workers.emplace_back([this] { impl_->workerLoop(); });
  // Start-up allocations land here, at load, not in whichever run a worker happens to get scheduled.
  std::unique_lock<std::mutex> lock(impl_->mutex);
  impl_->done.wait(lock, [&] { return impl_->startedWorkers == threads_ - 1; });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  for (auto& t : impl_->workers) t.join();
  delete impl_;
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
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.body = &body;
    s.count = count;
    s.chunk = chunk;
    s.chunks = (count + chunk - 1) / chunk;
    s.nextChunk.store(0, std::memory_order_relaxed);
    ++s.generation;
    s.open = true;
  }
  s.wake.notify_all();
  tInsideParallelFor = true;
  s.drain(body);
  tInsideParallelFor = false;
  std::unique_lock<std::mutex> lock(s.mutex);
  s.open = false;  // late wakers skip this job; those inside finish their chunks
  s.done.wait(lock, [&] { return s.busyWorkers == 0; });
  s.body = nullptr;
}

}  // namespace ctxkit::kernels
