// Element codecs for the narrow types only Cast handles: float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ),
// float4 (E2M1) and packed 4-bit integers (two per byte, low nibble first).
#pragma once

#include "ir/elem_type.h"

#include <cstddef>
#include <cstdint>

namespace ctxkit::cpu {

bool isSmallType(ir::ElemType type);

// Reads elements [begin, begin + n) of a buffer of `type` as doubles.
void loadSmall(ir::ElemType type, const void* base, size_t begin, size_t n, double* out);

// Writes n doubles into elements [begin, begin + n). Floats round to nearest even; out-of-range values
// saturate to the largest finite value when `saturate` (float8), else become infinity or NaN as ONNX's Cast
// specifies. 4-bit integers truncate and wrap like other integer casts. Callers writing 4-bit types from several
// threads must split at even element indices (two elements share a byte).
void storeSmall(ir::ElemType type, const double* in, void* base, size_t begin, size_t n, bool saturate);

}  // namespace ctxkit::cpu
