// The weight-sharing figures of one context binary, shared by ctxgen's report and ctxinspect.
#include "program/sharing.h"

#include <vector>

namespace ctxkit::program {

double SharingFigures::ratio() const {
  return uniqueBytes == 0 ? 1.0 : static_cast<double>(referencedBytes) / static_cast<double>(uniqueBytes);
}

SharingFigures sharingFigures(std::span<const uint64_t> weightBytes, std::span<const Program* const> programs) {
  SharingFigures f;
  for (uint64_t b : weightBytes) f.storedBytes += b;
  std::vector<bool> referenced(weightBytes.size(), false);
  for (const Program* p : programs)
    for (const auto& t : p->tensors) {
      if (t.kind != TensorKind::Weight || t.index >= weightBytes.size()) continue;
      f.referencedBytes += weightBytes[t.index];
      if (!referenced[t.index]) f.uniqueBytes += weightBytes[t.index];
      referenced[t.index] = true;
    }
  return f;
}

}  // namespace ctxkit::program
