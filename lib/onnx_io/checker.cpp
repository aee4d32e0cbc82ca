// The ONNX checker (onnx 1.12) behind a Status: its exceptions stop here.
#include "onnx_io/onnx_io.h"

#include <onnx/checker.h>

#include <exception>
#include <string>

namespace ctxkit::onnx_io {

Status checkModelFile(const std::filesystem::path& path) {
  std::string reason;
  try {
    // The path overload, so that the checker resolves external data against the model's folder.
    onnx::checker::check_model(path.string());
    return Status::ok();
  } catch (const std::exception& e) {
    reason = e.what();
  } catch (...) {
    reason = "unknown failure";
  }
  while (!reason.empty() && (reason.back() == '\n' || reason.back() == ' ' || reason.back() == '.')) reason.pop_back();
  return makeError(ErrorCode::InvalidGraph, "checking '{}': onnx checker: {}", path.string(), reason);
}

}  // namespace ctxkit::onnx_io
