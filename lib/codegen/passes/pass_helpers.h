// What several lowering passes ask alike: an activation's parameters (fuse-epilogue, fuse-qdq, match-activations) and
// folding a per-channel affine into a Conv or Gemm (fold-batchnorm, fold-affine).
#pragma once

#include "codegen/lowering_state.h"

#include <functional>
#include <optional>
#include <vector>

namespace ctxkit::codegen {

// Clip's bounds as fused-activation parameters: attributes before opset 11, constant inputs after.
std::optional<std::vector<float>> clipBounds(const LoweringState& state, const LOp& clip);

// The activation `act` applies, as an epilogue (its parameters from attributes or constant inputs).
std::optional<ops::Epilogue> activationOf(const LoweringState& state, const LOp& act);

// A weightless context (LowerOptions::plainWeights) derives a weight at load from `w` instead of storing what it
// derives (docs/weight-sharing.md#derived-weights) when `w` is a load-time value (an earlier derivation's) or a source
// model's constant larger than 4 KiB; a smaller one is derived now and stored. `w`'s shape, when so.
std::optional<ir::Shape> derivesAtLoad(const LoweringState& state, ValueId w);

// y = x * scale[c] + shift[c] over output channels c.
struct ChannelAffine {
  std::vector<double> scale, shift;
};

// Folds into each Conv or Gemm whose weights (and bias, when present) are float32 constants the per-channel affine
// that the one op reading its output applies: `affineOf(producer, reader, channels)` gives it, or nothing when the
// reader applies none. The weights and bias are rescaled, the reader goes and the producer takes over its output;
// with `chains`, the producer is tried again (it may take the next affine of a chain). Returns how many it folded.
using AffineOf = std::function<std::optional<ChannelAffine>(const LOp& producer, const LOp& reader, int64_t channels)>;
Expected<size_t> foldChannelAffines(LoweringState& state, bool chains, const AffineOf& affineOf);

}  // namespace ctxkit::codegen
