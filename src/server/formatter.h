#pragma once
// Wire shapes of the APIs. A Formatter turns a Generation's deltas into bytes: SSE chunks
// (OpenAI), NDJSON lines (Ollama), or, when not streaming, one JSON body at the end.
#include <memory>
#include <string>

#include "server/generation.h"

namespace tandem::server {

class Formatter {
 public:
  virtual ~Formatter() = default;
  virtual const char* stream_content_type() const = 0;
  // Streaming: the first bytes (OpenAI's role chunk). Non-streaming: "".
  virtual std::string start() = 0;
  // Streaming: the bytes for this delta. Non-streaming: accumulates and returns "".
  virtual std::string delta(const ChoiceDelta& d) = 0;
  // Streaming: the closing bytes (usage chunk, [DONE], Ollama's final line).
  // Non-streaming: the whole response body.
  virtual std::string finish(const Totals& t) = 0;
  // Streaming: an error event after the headers went out.
  virtual std::string stream_error(const std::string& msg) = 0;
  // Not streaming: the body of a 500 when the engine failed, in the API's error shape.
  virtual std::string error_body(const std::string& msg) = 0;
};

std::unique_ptr<Formatter> make_openai_formatter(const Generation& g, const std::string& model);
std::unique_ptr<Formatter> make_ollama_formatter(const Generation& g, const std::string& model);

// Helpers shared by the formatters and routes.
std::string random_id(const char* prefix, int len);  // "chatcmpl-" + len alphanumerics
int64_t unix_seconds();
std::string rfc3339_now();        // "2026-11-30T02:45:14.123456789Z", as Ollama writes times
std::string dump(const json& j);  // invalid UTF-8 replaced, never throws

// Error bodies: OpenAI `{"error":{message,type,param,code}}`, Ollama `{"error":"msg"}`.
std::string openai_error_body(int status, const std::string& msg, const std::string& param = {},
                              const std::string& code = {}, const std::string& type = {});
std::string ollama_error_body(const std::string& msg);

}  // namespace tandem::server
