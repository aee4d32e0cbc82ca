// ONNX Runtime's C API as the plugin EP uses it: the API tables, and conversions between OrtStatus and our Status.
// ORT's headers are the only ones here that the rest of ctxkit never sees.
#pragma once

#include "support/status.h"

#include <onnxruntime_c_api.h>  // includes onnxruntime_ep_c_api.h, which has no include guard of its own

#include <string>

namespace ctxkit::ort_ep {

// The API tables of the ONNX Runtime that loaded the library (API version ORT_API_VERSION).
struct Api {
  const OrtApi& ort;
  const OrtEpApi& ep;
};

// An OrtStatus for ORT, with the ORT error code closest to ours.
OrtStatus* toOrtStatus(const Api& api, const Error& error);
// Our Status from ORT's (released here); `what` says which call failed.
Status fromOrtStatus(const Api& api, OrtStatus* status, std::string_view what);

// A session config entry, or `fallback` when absent.
Expected<std::string> sessionConfigEntry(const Api& api, const OrtSessionOptions& options, const std::string& key,
                                         const std::string& fallback);

}  // namespace ctxkit::ort_ep

// Returns our error from a failing ORT call.
#define CTX_ORT_RETURN_IF_ERROR(api, call) CTX_RETURN_IF_ERROR(::ctxkit::ort_ep::fromOrtStatus((api), (call), #call))
