// Element conversions between numeric types: float16/bfloat16 bit patterns and whole buffers (Cast).
#pragma once

#include "ir/elem_type.h"
#include "support/status.h"

#include <cstddef>
#include <cstdint>

namespace ctxkit::kernels {

float halfToFloat(uint16_t bits);
uint16_t floatToHalf(float value);  // round to nearest even; NaN stays NaN, overflow gives infinity
float bfloat16ToFloat(uint16_t bits);
uint16_t floatToBfloat16(float value);  // round to nearest even

// True for the types convertElements handles: ints, floats (incl. float16/bfloat16) and bool.
bool isConvertible(ir::ElemType type);

// Converts `count` elements from `src` (type `from`) to `dst` (type `to`), as ONNX Cast does: integers
// wrap, floats truncate toward zero when cast to integers (NaN gives 0), anything non-zero is true.
Status convertElements(ir::ElemType from, const void* src, ir::ElemType to, void* dst, size_t count);

}  // namespace ctxkit::kernels
