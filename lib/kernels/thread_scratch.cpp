#include "kernels/thread_scratch.h"

#include "cpu/gemm.h"
#include "kernels/kernels.h"

#include <algorithm>
#include <atomic>

namespace ctxkit::kernels {

namespace {

// One mark per buffer, in the order of `sizes` below.
constexpr size_t kBuffers = 16;
std::atomic<size_t> gMarks[kBuffers];
std::atomic<uint64_t> gEpoch{0};

thread_local ThreadScratch tScratch;

// The capacities of this thread's buffers (in elements), in a fixed order.
void capacities(const ThreadScratch& s, size_t (&out)[kBuffers]) {
  const size_t values[kBuffers] = {
      s.convPlane.dataCapacity(), s.convPlane.tapCapacity(), s.poolPlane.dataCapacity(), s.poolPlane.tapCapacity(),
      s.convTaps.capacity(),      s.poolTaps.capacity(),     s.convColumns.capacity(),   s.poolOnes.capacity(),
      s.poolDivisors.capacity(),  s.convWeights.capacity(),  s.convRuns.capacity(),      s.sortOrder.capacity(),
      s.nbitsTile.capacity(),     s.depthwise.capacity(),    s.roiSamples.capacity(),    s.convTile.capacity()};
  std::copy(values, values + kBuffers, out);
}

}  // namespace

ThreadScratch& threadScratch() { return tScratch; }

bool noteThreadScratch() {
  size_t have[kBuffers];
  capacities(tScratch, have);
  bool rose = false;
  for (size_t i = 0; i < kBuffers; ++i) {
    size_t mark = gMarks[i].load(std::memory_order_relaxed);
    while (have[i] > mark && !gMarks[i].compare_exchange_weak(mark, have[i])) {
    }
    rose = rose || have[i] > mark;
  }
  if (rose) gEpoch.fetch_add(1);
  return rose;
}

uint64_t threadScratchEpoch() { return gEpoch.load(); }

void reserveThreadScratch() {
  ThreadScratch& s = tScratch;
  auto mark = [](size_t i) { return gMarks[i].load(std::memory_order_relaxed); };
  s.convPlane.reserve(mark(0), mark(1));
  s.poolPlane.reserve(mark(2), mark(3));
  s.convTaps.reserve(mark(4));
  s.poolTaps.reserve(mark(5));
  s.convColumns.reserve(mark(6));
  s.poolOnes.reserve(mark(7));
  s.poolDivisors.reserve(mark(8));
  s.convWeights.reserve(mark(9));
  s.convRuns.reserve(mark(10));
  s.sortOrder.reserve(mark(11));
  s.nbitsTile.reserve(mark(12));
  s.depthwise.reserve(mark(13));
  s.roiSamples.reserve(mark(14));
  s.convTile.reserve(mark(15));
}

}  // namespace ctxkit::kernels

namespace ctxkit::kernels {

std::unique_ptr<ThreadPool> makeThreadPool(int threads) {
  static const cpu::ThreadScratchHooks hooks[] = {
      {.start = cpu::reserveGemmScratch},
      {.note = [] { noteThreadScratch(); }, .epoch = threadScratchEpoch, .reserve = reserveThreadScratch},
  };
  return std::make_unique<ThreadPool>(threads, hooks);
}

}  // namespace ctxkit::kernels
