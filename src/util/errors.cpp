#include "superpoint_rt/errors.hpp"

namespace superpoint_rt {

const char* to_string(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::InvalidArgument: return "invalid_argument";
    case ErrorKind::TypeMismatch: return "type_mismatch";
    case ErrorKind::NotFound: return "not_found";
    case ErrorKind::DecodeError: return "decode_error";
    case ErrorKind::UnsupportedFormat: return "unsupported_format";
    case ErrorKind::TooLarge: return "too_large";
    case ErrorKind::Io: return "io_error";
    case ErrorKind::Model: return "model_error";
    case ErrorKind::Closed: return "closed";
    case ErrorKind::Overloaded: return "overloaded";
    case ErrorKind::Internal: return "internal_error";
  }
  return "internal_error";
}

}  // namespace superpoint_rt
