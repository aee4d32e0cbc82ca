// Names, sizes and target preferences of weight layouts.
#include "cpu/weight_layout.h"

#include <fmt/format.h>

namespace ctxkit::cpu {

std::string layoutName(const WeightLayout& layout) {
  switch (layout.kind) {
    case WeightLayoutKind::Plain: return "plain";
    case WeightLayoutKind::GemmPanels: return fmt::format("gemm-panels({}x{})", layout.width, layout.depth);
    case WeightLayoutKind::GemmPanelsTransposed: return fmt::format("gemm-panels-t({}x{})", layout.width, layout.depth);
    case WeightLayoutKind::Float16Widened: return "float16-widened";
  }
  return fmt::format("layout-{}", static_cast<int>(layout.kind));
}

std::optional<uint64_t> layoutElements(const WeightLayout& layout, std::span<const int64_t> shape) {
  if (layout.kind == WeightLayoutKind::Float16Widened && (layout.width != 0 || layout.depth != 0)) return std::nullopt;
  if (layout.kind == WeightLayoutKind::Plain || layout.kind == WeightLayoutKind::Float16Widened) {
    uint64_t n = 1;
    for (int64_t d : shape) {
      if (d < 0 || (d > 0 && n > UINT64_MAX / static_cast<uint64_t>(d))) return std::nullopt;
      n *= static_cast<uint64_t>(d);
    }
    return n;
  }
  if (layout.kind != WeightLayoutKind::GemmPanels && layout.kind != WeightLayoutKind::GemmPanelsTransposed)
    return std::nullopt;
  // Transposed panels also hold a weight of higher rank (a Conv's [M, C, taps...]) as [shape[0], the rest].
  bool transposed = layout.kind == WeightLayoutKind::GemmPanelsTransposed;
  if (shape.size() < 2 || (!transposed && shape.size() != 2) || layout.width == 0 || layout.width > kMaxPanelWidth ||
      layout.depth == 0 || layout.depth > kMaxPanelDepth)
    return std::nullopt;
  constexpr int64_t kMaxSide = int64_t{1} << 40;
  int64_t rest = 1;
  for (size_t d = 1; d < shape.size(); ++d) {
    if (shape[d] < 0 || (shape[d] > 0 && rest > kMaxSide / shape[d])) return std::nullopt;
    rest *= shape[d];
  }
  int64_t k = transposed ? rest : shape[0], n = transposed ? shape[0] : rest;
  if (k < 0 || n < 0 || k > kMaxSide || n > kMaxSide) return std::nullopt;
  uint64_t panels = (static_cast<uint64_t>(n) + layout.width - 1) / layout.width;
  return static_cast<uint64_t>(k) * panels * layout.width;
}

std::optional<WeightLayout> parseGemmLayoutPreference(std::string_view text) {
  if (text == "row-major" || text == "plain") return WeightLayout{};
  for (uint16_t width : {8, 16, 32})
    if (text == fmt::format("panels-{}", width)) return WeightLayout{WeightLayoutKind::GemmPanels, width, 256};
  return std::nullopt;
}

}  // namespace ctxkit::cpu
