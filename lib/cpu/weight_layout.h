// How a weight's bytes are arranged. Plain is the ONNX row-major order; the GEMM panel layouts hold a 2-D weight
// as the B operand of a matrix product, cut into panels the GEMM micro-kernel reads directly (no packing at run
// time). cpu::packWeight is the one definition of each layout's bytes. Float16Widened is a float32 tensor whose
// weight is stored as float16 in row-major order (the source's bytes) and widened, exactly, when it is loaded.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ctxkit::cpu {

enum class WeightLayoutKind : uint8_t {
  Plain = 0,
  GemmPanels = 1,            // a [K, N] weight used as B (MatMul, Gemm with transB = 0)
  GemmPanelsTransposed = 2,  // a [N, K] weight used as B transposed (Gemm with transB = 1)
  Float16Widened = 3,        // a float32 tensor stored as float16 (a target computing float16 in float32)
};

// GEMM panels: K is cut into blocks of `depth` rows; each block holds ceil(N / width) panels of depth x width
// floats (the last block is shallower, the last panel zero-padded), panel p of block b at element
// b * depth * ceil(N / width) * width + p * rows(b) * width, element (k, j) of a panel at k * width + j.
struct WeightLayout {
  WeightLayoutKind kind = WeightLayoutKind::Plain;
  uint16_t width = 0;  // panel width (the micro-kernel's NR); 0 for Plain
  uint16_t depth = 0;  // rows of K per block (the kernel's KC); 0 for Plain
  bool operator==(const WeightLayout&) const = default;
  bool plain() const { return kind == WeightLayoutKind::Plain; }
};

inline constexpr uint16_t kMaxPanelWidth = 64;
inline constexpr uint16_t kMaxPanelDepth = 4096;

// "plain", "gemm-panels(16x256)", "gemm-panels-t(16x256)" or "float16-widened".
std::string layoutName(const WeightLayout& layout);

// Elements a weight of this logical shape occupies in the layout (as the kernels read it: a Float16Widened weight
// as many as its shape), or nothing when the layout does not apply to the shape (GemmPanels needs rank 2;
// GemmPanelsTransposed rank 2 or more, viewed as [shape[0], the product of the rest]) or its parameters are out of
// range (Float16Widened has none: width and depth 0).
std::optional<uint64_t> layoutElements(const WeightLayout& layout, std::span<const int64_t> shape);

// A target's preferred layout for GEMM weights ("gemm" in preferred_layouts): "row-major" (Plain) or
// "panels-W" with W one of 8, 16, 32 (panels of that width, depth 256). Nothing for anything else.
std::optional<WeightLayout> parseGemmLayoutPreference(std::string_view text);

}  // namespace ctxkit::cpu
