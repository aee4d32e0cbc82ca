// What several lowering passes ask alike: an activation's parameters (fuse-epilogue, fuse-qdq, match-activations),
// replacing a spelled-out chain of ops by one (match-activations, match-layer-norm) and folding a per-channel affine
// into a Conv or Gemm (fold-batchnorm, fold-affine).
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

// The op alone reading `v` (exactly one input of one op), when `v` stays inside the op list: the matchers of
// spelled-out ops ask it of every value between the ops they replace.
std::optional<size_t> onlyReaderOf(const LoweringState& state, ValueId v);

// Replaces the ops `gone` (op indices, one of them `last`) by `op` at the place of `last`; returns how many ops went
// (gone.size() - 1). `op`'s inputs must be defined before the first of them.
size_t replaceOpsAt(LoweringState& state, std::vector<size_t> gone, size_t last, LOp op);

// A weightless context (LowerOptions::plainWeights) derives a weight at load from `w` instead of storing what it
// derives (docs/weight-sharing.md#derived-weights) when `w` is a load-time value (an earlier derivation's) or a source
// model's constant larger than 4 KiB; a smaller one is derived now and stored. `w`'s shape, when so.
std::optional<ir::Shape> derivesAtLoad(const LoweringState& state, ValueId w);

// Inserts before op i (a Conv or Gemm) three load-time ops computing its weight `w` (of shape `wShape`) rescaled:
// Cast(Cast(w, to `wide`) * scale, to `narrow`), `scale` (of type `wide`) stored, shaped to broadcast over w. Returns
// the rescaled weight's value; op i is then at i + 3.
ValueId scaleAtLoad(LoweringState& state, size_t i, ValueId w, const ir::Shape& wShape, ir::Tensor scale,
                    ir::ElemType wide, ir::ElemType narrow);

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
