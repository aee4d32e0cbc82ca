// Per-thread scratch of the kernels whose loops run on pool threads, grown together so that a steady-state run
// allocates nothing (issue 10).
//
// Which pool thread runs which chunk varies from run to run, so a buffer grown only on the thread that needed it
// could grow on another thread in any later run. Instead, after a pool loop, each thread that took part publishes
// its buffers' capacities as process-wide marks (noteThreadScratch), and when a mark rose the pool has every one of
// its threads reserve up to the marks (reserveThreadScratch) before the loop returns. After a program's first run,
// no thread meets a size it has not reserved.
#pragma once

#include "kernels/spatial.h"

#include <cstdint>
#include <vector>

namespace ctxkit::kernels {

struct ThreadScratch {
  detail::PaddedPlane convPlane, poolPlane;  // direct and depthwise Conv; float pooling
  std::vector<const float*> convTaps, poolTaps;
  std::vector<float> convColumns;   // im2col of one job when jobs are split across threads (a task's, on panels)
  std::vector<float> convTile;      // Conv on panels: a task's output positions x output channels, before transposing
  std::vector<float> convWeights;   // a Conv weight's taps that land inside the input for a band of outputs
  std::vector<float> convRuns;      // direct Conv onto narrow maps: every output row of up to four filters as one run
  std::vector<float> poolRows;      // float 2-D pooling: a block of padded planes and their row and column passes
  std::vector<float> poolDivisors;  // 3-D AveragePool: one output row's divisors
  std::vector<int64_t> sortOrder;   // TopK: the positions of one slice, in sorted order
  std::vector<float> nbitsTile;     // MatMulNBits: a tile of dequantized weight rows
  std::vector<float> depthwise;     // depthwise Conv onto small maps: a channel block's inputs, weights and outputs
  std::vector<detail::RoiSample> roiSamples;  // RoiAlign: one region's bilinear samples
  std::vector<int64_t> gridOffsets;           // 2-D GridSample: one image's tap offsets and weights per point
  std::vector<float> gridWeights;
  std::vector<float> winograd;  // Winograd Conv: a task's transformed input, products and output rows
};

// This thread's scratch.
ThreadScratch& threadScratch();

// `v`'s first `n` elements, contents unspecified: grows `v` when it is shorter, never shrinks it. A buffer resized
// to each task's size value-initializes whatever it regrows (std::vector::resize): a memset per task once sizes vary
// between tasks and ops (4% of ResNet-18's CPU time on two threads when small maps' columns were shared).
template <typename T> T* scratchAtLeast(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// The buffers an op can size ahead of its first run (raiseThreadScratchMark).
enum class ScratchBuffer {
  ConvPlaneData,
  ConvPlaneTaps,
  ConvTaps,
  ConvColumns,
  ConvWeights,
  ConvRuns,
  Depthwise,
  ConvTile,
  PoolRows,
  Winograd
};

// Raises a buffer's mark to `elements`, as if a thread had grown it so: for ops prepared at load that know what their
// runs will size. A pool made afterwards reserves (and touches) it on every thread as it starts, so that the first run
// finds its pages mapped; an existing pool reserves it after its next loop.
void raiseThreadScratchMark(ScratchBuffer buffer, size_t elements);

// Raises the marks to this thread's capacities; true when one rose.
bool noteThreadScratch();

// A count that changes whenever a mark rises.
uint64_t threadScratchEpoch();

// Reserves this thread's buffers up to the marks; memory newly reserved is written once, so that a first run does not
// fault its pages in.
void reserveThreadScratch();

}  // namespace ctxkit::kernels
