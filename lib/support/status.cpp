// Names of error codes, as printed in messages.
#include "support/status.h"

namespace ctxkit {

const char* errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument: return "INVALID_ARGUMENT";
    case ErrorCode::InvalidGraph: return "INVALID_GRAPH";
    case ErrorCode::NotFound: return "NOT_FOUND";
    case ErrorCode::Unsupported: return "NOT_IMPLEMENTED";
    case ErrorCode::IoError: return "IO_ERROR";
    case ErrorCode::Mismatch: return "MISMATCH";
    case ErrorCode::Internal: return "INTERNAL";
  }
  return "UNKNOWN";
}

}  // namespace ctxkit
