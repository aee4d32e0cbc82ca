// The lowering passes, one class each, defined one per file in this folder; codegen/lower.cpp runs them in the
// order docs/compiler.md#lowering lists. Each reports what it changed as counts (ir::PassChange).
#pragma once

#include "codegen/lowering_state.h"

#include <filesystem>
#include <map>
#include <memory>

namespace ctxkit::codegen {

#define CTXKIT_LOWERING_PASS(Class, passName, isRequired)                                                              \
  class Class final : public LoweringPass {                                                                            \
  public:                                                                                                              \
    std::string_view name() const override { return passName; }                                                        \
    bool required() const override { return isRequired; }                                                              \
    Expected<ir::PassChange> run(LoweringState& state) const override;                                                 \
  };

// QDQ groups (DequantizeLinear on 8-bit activation and weight, Conv/MatMul/Gemm, optional bias and Relu/Clip,
// QuantizeLinear) become QLinearConv or QLinearMatMul on the 8-bit weights. Runs first: fold-constants would turn the
// dequantized weights into float32.
CTXKIT_LOWERING_PASS(FuseQdq, "fuse-qdq", false)
// Ops whose inputs are all constants are evaluated now and become weights.
CTXKIT_LOWERING_PASS(FoldConstants, "fold-constants", false)
// A zero Pad of the spatial axes read only by a Conv or AveragePool becomes that op's pads.
CTXKIT_LOWERING_PASS(FusePad, "fuse-pad", false)
// A Conv's filter taps that never land inside its input are cut from its constant weight, its pads shifted (a
// dilated Conv onto a map smaller than its dilation becomes a smaller one).
CTXKIT_LOWERING_PASS(PruneConvTaps, "prune-conv-taps", false)
// Conv or Gemm followed only by an inference BatchNormalization: one op with rescaled weights and bias.
CTXKIT_LOWERING_PASS(FoldBatchNorm, "fold-batchnorm", false)
// Conv or Gemm followed only by Mul/Add/Sub/Div of a per-channel constant: folded into weights and bias.
CTXKIT_LOWERING_PASS(FoldAffine, "fold-affine", false)
// For a target computing float16 in float32: float16 values become float32 between ops (inputs widened on entry,
// outputs rounded on exit, explicit Casts to float16 still rounding), float16 weights read as float32 and stored as
// float16.
CTXKIT_LOWERING_PASS(WidenFloat16, "widen-float16", false)
// MatMul by a constant [K, N] followed only by Add of a bias [N]: one Gemm between two views.
CTXKIT_LOWERING_PASS(FuseMatMulAdd, "fuse-matmul-add", false)
// Activations spelled out as arithmetic (x * Clip(x + 3, 0, 6) / 6) become the activation op (HardSwish).
CTXKIT_LOWERING_PASS(MatchActivations, "match-activations", false)
// LayerNorm spelled out over the last axes (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, then a constant
// scale and shift) becomes LayerNormalization.
CTXKIT_LOWERING_PASS(MatchLayerNorm, "match-layer-norm", false)
// Activations, x * Sigmoid(x) and a scalar scale and shift after Conv/Gemm/MatMul become their epilogue.
CTXKIT_LOWERING_PASS(FuseEpilogue, "fuse-epilogue", false)
// Each float32 Conv of static shapes gets its algorithm: the kernels' heuristic (the cost model), or with
// LowerOptions::tuner the fastest measured on this machine (docs/ctxgen.md#tuning).
CTXKIT_LOWERING_PASS(ChooseKernels, "choose-kernels", false)
// Constant GEMM operands are stored in the target's panel layout.
CTXKIT_LOWERING_PASS(ChooseLayouts, "choose-layouts", false)
// The ops become a program: typed ops, weights interned, reshape-like ops as views.
CTXKIT_LOWERING_PASS(EmitProgram, "emit-program", true)
// Arena buffers get offsets in one arena, reused by lifetime.
CTXKIT_LOWERING_PASS(PlanMemory, "plan-memory", true)

#undef CTXKIT_LOWERING_PASS

// ctxgen --tune: times each distinct Conv's algorithms on this machine (serially, median of a few runs) and keeps the
// fastest whose output matches the heuristic's within kTuneTolerance, in a timing cache keyed by the op's shapes and
// attributes and this CPU's features (text, docs/ctxgen.md#tuning), shared by every model and run that opens it.
class KernelTuner {
public:
  // One tuned op, for ctxgen --json.
  struct Choice {
    std::string partition, node, key;
    cpu::ConvAlgorithm heuristic = cpu::ConvAlgorithm::Heuristic, chosen = cpu::ConvAlgorithm::Heuristic;
    double heuristicMs = 0, chosenMs = 0;  // median run times measured (now or when cached)
    bool cacheHit = false;
  };
  // Opens the cache at `path`: a missing file is an empty cache; one that is not a cache this ctxkit wrote is an
  // error naming the file and line (never a silent re-tune: the user deletes it).
  static Expected<std::unique_ptr<KernelTuner>> open(std::filesystem::path path);
  // The algorithm for a Conv of `attrs` over x (with bias when `bias`) among `candidates` (the heuristic's first),
  // from the cache or measured now; recorded in choices() under `partition` and `node`.
  Expected<cpu::ConvAlgorithm> chooseConv(const ops::ConvAttrs& attrs, std::span<const int64_t> x,
                                          std::span<const int64_t> weight, bool bias,
                                          std::span<const cpu::ConvAlgorithm> candidates, const std::string& partition,
                                          const std::string& node);
  // Writes the cache back when something was measured (to a temporary file, renamed over it).
  Status save() const;
  const std::filesystem::path& path() const { return path_; }
  const std::vector<Choice>& choices() const { return choices_; }
  size_t hits() const { return hits_; }
  size_t misses() const { return misses_; }
  // What the cache is keyed by besides the op: this CPU's SIMD features and GEMM kernel.
  static std::string cpuFeatures();

  struct Entry {
    cpu::ConvAlgorithm chosen = cpu::ConvAlgorithm::Heuristic;
    std::vector<std::pair<cpu::ConvAlgorithm, double>> times;  // ms per algorithm measured, the heuristic's first
  };

private:
  std::filesystem::path path_;
  std::map<std::string, Entry> entries_;  // by cpuFeatures() + '\t' + op key
  std::vector<Choice> choices_;
  size_t hits_ = 0, misses_ = 0;
  bool changed_ = false;
};

// How far an algorithm's output may stray from the heuristic's (max |a - b| over max(1, max |b|)) to be chosen.
inline constexpr double kTuneTolerance = 1e-4;

}  // namespace ctxkit::codegen
