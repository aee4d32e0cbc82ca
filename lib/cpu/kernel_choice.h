// The algorithm a compiled program records for a Conv (codegen's choose-kernels pass; docs/format/program.md#kernel-
// choices), which the runtime runs instead of deciding by its own heuristic.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ctxkit::cpu {

enum class ConvAlgorithm : uint8_t {
  Heuristic = 0,  // none recorded: the kernel decides on the shapes (kernels::convHeuristic)
  Direct = 1,     // per output row, a weighted sum of tap rows (any Conv)
  Gemm = 2,       // im2col (in bands of output rows skipping padding-only taps) + GEMM; a 1x1 reads its input as is
  Panels = 3,     // unfolded input x the weight in GEMM panels (group 1, a constant float32 weight)
  DepthwiseSmallMap = 4,  // channels in vectors, position-major (one input and one output channel per group, 1-D/2-D)
  GroupedBlocks = 5,      // each group a small GEMM: output channels in vectors, inputs broadcast (1-D/2-D)
  Winograd = 6,           // F(4x4, 3x3): 36 GEMMs on transformed tiles (2-D 3x3, stride 1, no dilation, group 1)
};
inline constexpr uint8_t kConvAlgorithmCount = 7;

inline std::string_view convAlgorithmName(ConvAlgorithm a) {
  switch (a) {
    case ConvAlgorithm::Heuristic: return "heuristic";
    case ConvAlgorithm::Direct: return "direct";
    case ConvAlgorithm::Gemm: return "gemm";
    case ConvAlgorithm::Panels: return "panels";
    case ConvAlgorithm::DepthwiseSmallMap: return "depthwise-small-map";
    case ConvAlgorithm::GroupedBlocks: return "grouped-blocks";
    case ConvAlgorithm::Winograd: return "winograd";
  }
  return "unknown";
}

inline std::optional<ConvAlgorithm> convAlgorithmNamed(std::string_view name) {
  for (uint8_t i = 0; i < kConvAlgorithmCount; ++i)
    if (convAlgorithmName(static_cast<ConvAlgorithm>(i)) == name) return static_cast<ConvAlgorithm>(i);
  return std::nullopt;
}

// An op's recorded kernel: the algorithm and its blocking (0: the kernel's default; no algorithm reads another yet).
struct KernelChoice {
  ConvAlgorithm algorithm = ConvAlgorithm::Heuristic;
  uint32_t blocking = 0;
  bool recorded() const { return algorithm != ConvAlgorithm::Heuristic; }
  bool operator==(const KernelChoice&) const = default;
};

}  // namespace ctxkit::cpu
