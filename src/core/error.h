#pragma once
// One exception type for every library error. Library code never exits; the CLI and the
// server turn an Error into a message (CLI) or one JSON error shape (server).
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace tandem {

enum class ErrorKind {
  kInvalidArgument,  // bad input from a user or a file: 400-class
  kNotFound,         // missing model, file, tensor: 404-class
  kUnsupported,      // valid but not handled (architecture, dtype, field value)
  kResource,         // out of memory, model too large, queue full
  kIo,               // filesystem or network failure
  kInternal,         // a bug or a device failure
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& msg) : std::runtime_error(msg), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

template <typename... Args>
[[noreturn]] void fail(ErrorKind kind, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(kind, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tandem

// Internal invariant: a failure here is a bug, reported with its location.
#define TANDEM_CHECK(cond)                                                                        \
  do {                                                                                            \
    if (!(cond))                                                                                  \
      ::tandem::fail(::tandem::ErrorKind::kInternal, "check failed: {} ({}:{})", #cond, __FILE__, \
                     __LINE__);                                                                   \
  } while (0)
