// Per-thread kernel scratch and the process-wide marks every pool thread reserves up to (thread_scratch.h).
#include "kernels/thread_scratch.h"

#include "cpu/gemm.h"
#include "kernels/kernels.h"

#include <algorithm>
#include <atomic>

namespace ctxkit::kernels {

namespace {

// One mark per buffer, in the order of `sizes` below.
constexpr size_t kBuffers = 19;
std::atomic<size_t> gMarks[kBuffers];
std::atomic<uint64_t> gEpoch{0};

thread_local ThreadScratch tScratch;

// The capacities of this thread's buffers (in elements), in a fixed order.
void capacities(const ThreadScratch& s, size_t (&out)[kBuffers]) {
  const size_t values[kBuffers] = {s.convPlane.dataCapacity(), s.convPlane.tapCapacity(), s.poolPlane.dataCapacity(),
                                   s.poolPlane.tapCapacity(),  s.convTaps.capacity(),     s.poolTaps.capacity(),
                                   s.convColumns.capacity(),   s.poolRows.capacity(),     s.poolDivisors.capacity(),
                                   s.convWeights.capacity(),   s.convRuns.capacity(),     s.sortOrder.capacity(),
                                   s.nbitsTile.capacity(),     s.depthwise.capacity(),    s.roiSamples.capacity(),
                                   s.convTile.capacity(),      s.gridOffsets.capacity(),  s.gridWeights.capacity()};
  std::copy(values, values + kBuffers, out);
}

// Each ScratchBuffer's index in the marks.
constexpr size_t kMarkOf[] = {0, 1, 4, 6, 9, 10, 13, 15, 7, 18};

// Reserves `v` up to `n` elements; when that allocates, value-initializes the new capacity once (its pages are
// mapped now, not by a run's first resize).
template <typename T> void reserveTouched(std::vector<T>& v, size_t n) {
  if (v.capacity() >= n) return;
  v.reserve(n);
  const size_t size = v.size();
  v.resize(v.capacity());
  v.resize(size);
}

}  // namespace

ThreadScratch& threadScratch() { return tScratch; }

void raiseThreadScratchMark(ScratchBuffer buffer, size_t elements) {
  std::atomic<size_t>& mark = gMarks[kMarkOf[static_cast<size_t>(buffer)]];
  size_t old = mark.load(std::memory_order_relaxed);
  while (elements > old && !mark.compare_exchange_weak(old, elements)) {
  }
  if (elements > old) gEpoch.fetch_add(1);
}

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
  reserveTouched(s.convTaps, mark(4));
  reserveTouched(s.poolTaps, mark(5));
  reserveTouched(s.convColumns, mark(6));
  reserveTouched(s.poolRows, mark(7));
  reserveTouched(s.poolDivisors, mark(8));
  reserveTouched(s.convWeights, mark(9));
  reserveTouched(s.convRuns, mark(10));
  reserveTouched(s.sortOrder, mark(11));
  reserveTouched(s.nbitsTile, mark(12));
  reserveTouched(s.depthwise, mark(13));
  reserveTouched(s.roiSamples, mark(14));
  reserveTouched(s.convTile, mark(15));
  reserveTouched(s.gridOffsets, mark(16));
  reserveTouched(s.gridWeights, mark(17));
  reserveTouched(s.winograd, mark(18));
}

}  // namespace ctxkit::kernels

namespace ctxkit::kernels {

std::unique_ptr<ThreadPool> makeThreadPool(int threads) {
  static const cpu::ThreadScratchHooks hooks[] = {
      {.start = cpu::reserveGemmScratch},
      // Starting reserves up to the marks the programs loaded so far raised (raiseThreadScratchMark).
      {.start = reserveThreadScratch,
       .note = [] { noteThreadScratch(); },
       .epoch = threadScratchEpoch,
       .reserve = reserveThreadScratch},
  };
  return std::make_unique<ThreadPool>(threads, hooks);
}

}  // namespace ctxkit::kernels
