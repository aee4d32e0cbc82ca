// Typed attributes in a program: the values of an attribute struct's fields, in the order its field list
// (CTXKIT_FIELDS) gives, with no names. Which struct an op carries follows from its op kind.
#pragma once

#include "ops/op_schema.h"
#include "support/bytes.h"

namespace ctxkit::program {

void writeTypedAttrs(ByteWriter& w, const ops::OpAttrs& attrs);

// Reads the fields of `attrs` (already the struct of the op kind's family) in place. Lists are bounded by the
// bytes left; enum values are checked. Lists are allocated from `storage` (null: the heap).
Status readTypedAttrs(ByteReader& r, ops::OpAttrs& attrs, std::pmr::memory_resource* storage = nullptr);

}  // namespace ctxkit::program
