// OrtStatus <-> Status, and session config entries.
#include "ort_ep/ort_api.h"

namespace ctxkit::ort_ep {

OrtStatus* toOrtStatus(const Api& api, const Error& error) {
  OrtErrorCode code = ORT_FAIL;
  switch (error.code()) {
    case ErrorCode::InvalidArgument: code = ORT_INVALID_ARGUMENT; break;
    case ErrorCode::InvalidGraph: code = ORT_INVALID_GRAPH; break;
    case ErrorCode::NotFound: code = ORT_NO_SUCHFILE; break;
    case ErrorCode::Unsupported: code = ORT_NOT_IMPLEMENTED; break;
    case ErrorCode::IoError:
    case ErrorCode::Mismatch:
    case ErrorCode::Internal: code = ORT_FAIL; break;
  }
  return api.ort.CreateStatus(code, error.message().c_str());
}

Status fromOrtStatus(const Api& api, OrtStatus* status, std::string_view what) {
  if (status == nullptr) return Status::ok();
  std::string message = api.ort.GetErrorMessage(status);
  OrtErrorCode code = api.ort.GetErrorCode(status);
  api.ort.ReleaseStatus(status);
  ErrorCode ours = code == ORT_INVALID_ARGUMENT  ? ErrorCode::InvalidArgument
                   : code == ORT_INVALID_GRAPH   ? ErrorCode::InvalidGraph
                   : code == ORT_NOT_IMPLEMENTED ? ErrorCode::Unsupported
                                                 : ErrorCode::Internal;
  return makeError(ours, "onnxruntime: {}: {}", what, message);
}

Expected<std::string> sessionConfigEntry(const Api& api, const OrtSessionOptions& options, const std::string& key,
                                         const std::string& fallback) {
  int has = 0;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.HasSessionConfigEntry(&options, key.c_str(), &has));
  if (!has) return fallback;
  size_t size = 0;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.GetSessionConfigEntry(&options, key.c_str(), nullptr, &size));
  std::string value(size, '\0');
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.GetSessionConfigEntry(&options, key.c_str(), value.data(), &size));
  value.resize(size > 0 ? size - 1 : 0);  // size counts the terminating NUL
  return value;
}

}  // namespace ctxkit::ort_ep
