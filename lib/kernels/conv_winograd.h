// Winograd F(4x4, 3x3) for dense 3x3 Convs of stride 1 (docs/runtime.md#winograd-f4x4-3x3): each 6x6 tile of input
// becomes 36 transformed points, each point a GEMM over the input channels by a transformed weight, and each tile's 36
// products become its 4x4 outputs: 36 multiply-adds per input channel and output channel for 16 outputs, where the
// plain Conv takes 144.
#pragma once

#include "cpu/gemm.h"
#include "kernels/spatial.h"

#include <memory>
#include <vector>

namespace ctxkit::kernels::detail {

// Whether window `w` is one Winograd F(4x4, 3x3) computes: 2-D, a 3x3 kernel, stride 1, no dilation (any padding).
bool winogradFits(const Window3& w);

// Whether a dense Conv of `channels` inputs onto `outChannels` outputs with window `w` runs on Winograd by default:
// it fits, its map fills at least half of 4 or more tiles, and it has channel pairs enough to pay for the transforms
// (1024 onto 9 tiles or more, 8192 onto fewer; ctxgen --tune's timings in conv_winograd.cpp).
bool winogradByDefault(const Window3& w, int64_t channels, int64_t outChannels);

// A weight [M, C, 3, 3] transformed once (at prepare): per transform point, U = G g Gᵀ as the GEMM's B (C x M) in
// panels of this CPU's natural width (or `width`); runs multiply in strips of that width's kernel.
struct WinogradWeights {
  std::vector<float> data;
  size_t channels = 0, outChannels = 0, width = 0;
  size_t pointFloats = 0;  // floats of one point's panels
  cpu::PanelsB point(size_t xi) const;
};
// `width` 0 takes cpu::sgemmNaturalPanelWidth() (tests give 8 and 16 to run the strip heights of other CPUs).
std::shared_ptr<const WinogradWeights> transformWinogradWeights(const float* weight, int64_t outChannels,
                                                                int64_t channels, size_t width = 0);

// The most floats of ThreadScratch::winograd a run of `batch` images takes on one thread (the most a task takes).
size_t winogradScratchFloats(const Window3& w, int64_t batch, int64_t channels, int64_t outChannels);

// Y = Conv(X) + bias with the fused activation, for `batch` images of window `w` (winogradFits).
void runWinograd(const OpContext& ctx, const WinogradWeights& u, const Window3& w, int64_t batch, const float* x,
                 const float* bias, float* y, const ops::Epilogue& act);

}  // namespace ctxkit::kernels::detail
