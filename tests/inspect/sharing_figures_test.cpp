// program::sharingFigures, the one definition of the sharing figures ctxgen's report and ctxinspect print.
#include "program/sharing.h"

#include <catch2/catch.hpp>

using namespace ctxkit;

namespace {

program::Program usingWeights(std::initializer_list<uint32_t> indices) {
  program::Program p;
  p.tensors.push_back(program::TensorDesc{});  // an arena tensor: not a weight reference
  for (uint32_t i : indices) {
    program::TensorDesc t;
    t.kind = program::TensorKind::Weight;
    t.index = i;
    p.tensors.push_back(t);
  }
  return p;
}

}  // namespace

TEST_CASE("sharing figures: references counted per use, unique per weight, stored for every weight", "[inspect]") {
  // Weights 0 and 1 are used by both graphs, weight 2 by one, weight 3 (a fallback initializer) by none.
  const std::vector<uint64_t> bytes{100, 50, 30, 1000};
  const program::Program a = usingWeights({0, 1, 2}), b = usingWeights({0, 1});
  const std::vector<const program::Program*> programs{&a, &b};
  const auto f = program::sharingFigures(bytes, programs);
  CHECK(f.referencedBytes == 100 + 50 + 30 + 100 + 50);
  CHECK(f.uniqueBytes == 180);
  CHECK(f.storedBytes == 1180);
  CHECK(f.ratio() == Approx(330.0 / 180.0));

  // No program references a weight: the ratio is 1, not a division by zero; out-of-range indices are ignored.
  const program::Program none = usingWeights({}), outOfRange = usingWeights({9});
  const std::vector<const program::Program*> idle{&none, &outOfRange};
  const auto g = program::sharingFigures(bytes, idle);
  CHECK(g.referencedBytes == 0);
  CHECK(g.uniqueBytes == 0);
  CHECK(g.storedBytes == 1180);
  CHECK(g.ratio() == 1.0);
}
