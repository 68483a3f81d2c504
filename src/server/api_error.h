#pragma once
// One error type for the HTTP APIs. Request parsing and validation throw ApiError; the
// router turns it into OpenAI's `{"error":{message,type,param,code}}` or Ollama's
// `{"error":"msg"}` with the same status. Library errors (tandem::Error) map by kind.
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "server/json_body.h"

namespace tandem::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, std::string param, const std::string& msg,
           std::string code = {})
      : std::runtime_error(msg),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& type() const { return type_; }    // OpenAI error type
  const std::string& param() const { return param_; }  // offending field, "" if none
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string type_, param_, code_;
};

// 400 naming the offending field: `bad_field("top_p", "must be in (0, 1], got {}", x)`.
template <typename... Args>
[[noreturn]] void bad_field(const std::string& param, fmt::format_string<Args...> f,
                            Args&&... args) {
  throw ApiError(400, "invalid_request_error", param, fmt::format(f, std::forward<Args>(args)...));
}

// 404 for a model name the server does not serve.
[[noreturn]] inline void model_not_found(const std::string& name) {
  throw ApiError(404, "invalid_request_error", "model",
                 fmt::format("model {} not found", quote(name)), "model_not_found");
}

// The status a library error becomes when it reaches a client.
inline int status_of(ErrorKind k) {
  switch (k) {
    case ErrorKind::kInvalidArgument:
      return 400;
    case ErrorKind::kNotFound:
      return 404;
    case ErrorKind::kUnsupported:
      return 400;
    case ErrorKind::kResource:
      return 503;
    case ErrorKind::kIo:
    case ErrorKind::kInternal:
      return 500;
  }
  return 500;
}

inline const char* openai_type_of(int status) {
  if (status == 401) return "authentication_error";
  if (status == 404) return "invalid_request_error";
  if (status == 429) return "rate_limit_exceeded";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

}  // namespace tandem::server
