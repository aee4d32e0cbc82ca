// Example app: loads compiled _ctx.onnx models with ctxkit::runtime, runs each on a .npy input and checks the output.
#include "ir/npy.h"
#include "runtime/session.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

using namespace ctxkit;

namespace {

// Runs `model` on `input` and compares the first output with `expected` (float32, abs+rel tolerance).
bool runOne(const std::string& model, const std::string& input, const std::string& expected) {
  auto session = runtime::Session::loadFile(model);
  if (!session) {
    std::fprintf(stderr, "%s: %s\n", model.c_str(), session.error().message().c_str());
    return false;
  }
  auto feed = ir::loadNpy(input);
  auto want = ir::loadNpy(expected);
  for (const auto* file : {&feed, &want}) {
    if (!*file) {
      std::fprintf(stderr, "%s: %s\n", model.c_str(), file->error().message().c_str());
      return false;
    }
  }
  auto outputs = (*session)->run({*feed});
  if (!outputs) {
    std::fprintf(stderr, "%s: %s\n", model.c_str(), outputs.error().message().c_str());
    return false;
  }
  const ir::Tensor& got = outputs->front();
  if (got.type() != ir::ElemType::Float || want->type() != ir::ElemType::Float ||
      got.elementCount() != want->elementCount()) {
    std::fprintf(stderr, "%s: output is not a float32 tensor of %llu elements\n", model.c_str(),
                 static_cast<unsigned long long>(want->elementCount()));
    return false;
  }
  double worst = 0;
  bool ok = true;
  for (uint64_t i = 0; i < got.elementCount(); ++i) {
    double diff = std::fabs(double(got.dataAs<float>()[i]) - double(want->dataAs<float>()[i]));
    worst = std::max(worst, diff);
    ok = ok && diff <= 1e-4 + 1e-3 * std::fabs(double(want->dataAs<float>()[i]));
  }
  const auto& stats = (*session)->stats();
  std::printf("%s: %s (%zu compiled node(s), %zu fallback node(s), max abs diff %.3g)\n", model.c_str(),
              ok ? "ok" : "MISMATCH", stats.compiledNodes, stats.fallbackNodes, worst);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || (argc - 1) % 3 != 0) {
    std::fprintf(stderr, "usage: %s MODEL_ctx.onnx INPUT.npy EXPECTED.npy [MODEL INPUT EXPECTED]...\n", argv[0]);
    return 2;
  }
  bool ok = true;
  for (int i = 1; i + 2 < argc; i += 3) ok = runOne(argv[i], argv[i + 1], argv[i + 2]) && ok;
  return ok ? 0 : 1;
}
