// Test helper: rewrites an ONNX model with all its initializers in an external data file beside it.
#include "onnx_io/onnx_io.h"

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s IN.onnx OUT.onnx DATA_FILE_NAME\n", argv[0]);
    return 2;
  }
  auto model = ctxkit::onnx_io::loadModel(argv[1]);
  if (!model) {
    std::fprintf(stderr, "%s\n", model.error().message().c_str());
    return 1;
  }
  auto status = ctxkit::onnx_io::saveModelWithExternalData(*model, argv[2], argv[3], 0);
  if (!status) {
    std::fprintf(stderr, "%s\n", status.error().message().c_str());
    return 1;
  }
  return 0;
}
