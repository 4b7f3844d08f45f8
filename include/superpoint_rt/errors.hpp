// superpoint-rt: error types.
//
// Every recoverable failure (bad input, bad parameter, missing file, network error, closed model) is thrown as a
// subclass of superpoint_rt::Error. The library never aborts or exits on bad input. Messages name the input (file,
// parameter) and the limit that was violated, so they can be shown to a user as they are.
//
// The interfaces map the kinds as follows: Python ValueError (InvalidArgument, DecodeError, UnsupportedFormat,
// TooLarge), TypeError (TypeMismatch), FileNotFoundError (NotFound), RuntimeError (the rest); HTTP 422
// (InvalidArgument, TypeMismatch), 400 (DecodeError), 413 (TooLarge), 415 (UnsupportedFormat), 503 (Overloaded,
// Closed); CLI exit code 2 for bad arguments.
#pragma once

#include <stdexcept>
#include <string>

namespace superpoint_rt {

enum class ErrorKind {
  InvalidArgument,    // a parameter or option out of range / NaN / unknown name
  TypeMismatch,       // a value of the wrong type (used by the language bindings)
  NotFound,           // a file, model repo, revision or tensor that does not exist
  DecodeError,        // an image whose bytes cannot be decoded (truncated, corrupt, empty)
  UnsupportedFormat,  // an image format that is not supported (wrong magic)
  TooLarge,           // pixel count or body size over the configured limit
  Io,                 // file system or network failure
  Model,              // weights / config inconsistent with the network (names the tensor and shapes)
  Closed,             // the model was closed
  Overloaded,         // the engine's memory budget (Options::memory_budget_mb) has no room for the request now
  Internal,           // a failure of a compute library (should not happen)
};

const char* to_string(ErrorKind kind) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace superpoint_rt
