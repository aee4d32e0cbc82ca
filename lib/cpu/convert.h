// Element conversions between numeric types: float16/bfloat16 bit patterns and whole buffers (Cast).
#pragma once

#include "ir/elem_type.h"
#include "support/status.h"

#include <cstddef>
#include <cstdint>

namespace ctxkit::cpu {

float halfToFloat(uint16_t bits);
uint16_t floatToHalf(float value);  // round to nearest even; NaN stays NaN, overflow gives infinity
float bfloat16ToFloat(uint16_t bits);
uint16_t floatToBfloat16(float value);  // round to nearest even

// True for the types convertElements handles: ints, floats (float16, bfloat16, float8 and float4 included),
// packed 4-bit ints and bool.
bool isConvertible(ir::ElemType type);

// Converts `count` elements from `src` (type `from`) to `dst` (type `to`), as ONNX Cast does: integers
// wrap, floats truncate toward zero when cast to integers (NaN gives 0), anything non-zero is true; float8
// saturates out-of-range values when `saturate` (Cast's attribute).
Status convertElements(ir::ElemType from, const void* src, ir::ElemType to, void* dst, size_t count,
                       bool saturate = true);
// The same for elements [begin, end) of both buffers (the way to address packed 4-bit types).
Status convertElementRange(ir::ElemType from, const void* src, ir::ElemType to, void* dst, size_t begin, size_t end,
                           bool saturate = true);

}  // namespace ctxkit::cpu
