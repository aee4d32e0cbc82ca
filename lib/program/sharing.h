// The weight-sharing figures of one context binary (docs/weight-sharing.md#figures), defined once for ctxgen's report
// and ctxinspect.
#pragma once

#include "program/program.h"

#include <cstdint>
#include <span>

namespace ctxkit::program {

struct SharingFigures {
  uint64_t referencedBytes = 0;  // every weight reference of every program (a weight used by two graphs counts twice)
  uint64_t uniqueBytes = 0;      // each weight that some program references, once
  uint64_t storedBytes = 0;      // every weight the binary stores, referenced by a program or not
  // referenced / unique: how many times each stored byte is used; 1 when no program references a weight.
  double ratio() const;
};

// The figures for programs run against one weight table, `weightBytes[i]` being entry i's stored size. Fallback
// initializers kept in the binary as ONNX external data are stored but referenced by no program: they count in
// storedBytes only, so the ratio measures sharing between compiled graphs. Weight indices out of range are ignored
// (readers report them elsewhere).
SharingFigures sharingFigures(std::span<const uint64_t> weightBytes, std::span<const Program* const> programs);

}  // namespace ctxkit::program
