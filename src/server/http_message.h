#pragma once
// HTTP requests and responses as the routes see them, without any networking: the transport
// (http_server.cpp) fills an HttpRequest from the wire and writes an HttpResponse back.
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/request_record.h"

namespace tandem::server {

class Generation;
class Formatter;
class ByteStream;

// Header fields in arrival order. Names are stored lower-cased; lookups are by lower-case
// name.
struct Headers {
  std::vector<std::pair<std::string, std::string>> items;

  // The first field called `name` (lower-case), or "" when there is none.
  std::string_view get(std::string_view name) const;
  bool has(std::string_view name) const;
  // Appends a field; the name is lower-cased.
  void add(std::string_view name, std::string value);
  // Replaces every field called `name` with one.
  void set(std::string_view name, std::string value);
};

struct HttpRequest {
  HttpRequest() = default;
  HttpRequest(std::string m, std::string t, std::string b = {})
      : method(std::move(m)), target(std::move(t)), body(std::move(b)) {}

  std::string method;  // "GET", "POST", "HEAD", ...
  std::string target;  // path and query
  std::string body;
  Headers headers;
  std::string remote;  // the peer's address ("" when not over a socket)
  int version = 11;    // HTTP version as Beast counts it: 10 (HTTP/1.0) or 11 (HTTP/1.1)
  // When the request's head was read (the request record's times start here); the router
  // takes "now" when the transport left it unset.
  std::chrono::steady_clock::time_point received{};

  std::string_view path() const;   // the target without its query
  std::string_view query() const;  // after '?', "" if none
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  Headers headers;  // sent besides Content-Type, Content-Length and Server
  // Set for a generation: the transport polls `gen` whenever `notify` fired, and writes
  // `fmt`'s bytes (streamed when `stream`, else one body at the end).
  std::unique_ptr<Generation> gen;
  std::unique_ptr<Formatter> fmt;
  bool stream = false;
  bool openai = true;  // error shape for failures after the start
  // What this request was, for the completion hooks (request_record.h): the router fills
  // it in handle(), the transport adds what it sent and hands it to Router::complete().
  RequestRecord record;
  std::chrono::steady_clock::time_point received{};  // the request's arrival
  // Set for other streamed responses (byte_stream.h): written as chunks as it has bytes.
  std::unique_ptr<ByteStream> source;

  HttpResponse();
  HttpResponse(HttpResponse&&) noexcept;
  HttpResponse& operator=(HttpResponse&&) noexcept;
  ~HttpResponse();
};

// ASCII lower-case.
std::string lower_ascii(std::string_view s);

}  // namespace tandem::server
