#pragma once
// What one HTTP request was, once it is over: the record that request logs and metrics read.
// The router starts it (id, route, key), the generation adds its tokens and times, and the
// transport adds what it sent; then every completion hook sees it once (Router::
// add_completion_hook). A hook runs on an I/O thread right after the response's last byte
// (or the moment the client is gone): it must be short and must not block (append a log
// line, bump counters). A hook that throws is logged and ignored.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tandem::server {

struct RequestRecord {
  std::string id;        // X-Request-Id: the client's when sane, else generated ("req_...")
  std::string method;    // "POST"
  std::string path;      // "/v1/chat/completions" (no query); "" when the request line was bad
  std::string route;     // the matched route's pattern ("/v1/models/{id}"); "" when none
  std::string api;       // "openai", "ollama", "anthropic" (the error shape), "" when unknown
  std::string key_name;  // the API key's name, "" when keys are off; never the key itself
  std::string remote;    // the peer's address
  std::string model;     // the model a generation asked for, "" otherwise

  int status = 0;       // the status sent (a stream that fails later keeps its 200)
  bool stream = false;  // the answer was streamed
  // Generation routes only (0 / -1 elsewhere). Tokens as the usage reports them.
  int prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
  double queue_ms = -1;    // arrival to the engine's first step on it (tokenizing + waiting)
  double ttft_ms = -1;     // arrival to the first generated token
  double duration_ms = 0;  // arrival (request head read) to the last byte sent
  // stop, length, tool_calls, error (engine failure), cancelled (the client left), timeout
  // (--request-timeout), shutdown (drain ended it); "" for requests without a generation.
  std::string finish_reason;
  std::string error;                     // the error message sent, "" when none
  uint64_t bytes_in = 0, bytes_out = 0;  // body bytes received, response bytes sent

  std::chrono::system_clock::time_point started;  // wall clock at arrival
  // Labels a policy or route adds for logs ({"cache","hit"}), in the order added.
  std::vector<std::pair<std::string, std::string>> tags;
};

using CompletionHook = std::function<void(const RequestRecord&)>;

}  // namespace tandem::server
