#include "server/http_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "core/error.h"

namespace tandem::server {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void parse_url(const std::string& url, std::string& host, std::string& port) {
  std::string rest = url;
  if (rest.rfind("http://", 0) == 0)
    rest = rest.substr(7);
  else if (rest.find("://") != std::string::npos)
    fail(ErrorKind::kInvalidArgument, "only http:// URLs are supported, got '{}'", url);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t colon = rest.rfind(':');
  host = colon == std::string::npos ? rest : rest.substr(0, colon);
  port = colon == std::string::npos ? "80" : rest.substr(colon + 1);
  if (host.empty()) fail(ErrorKind::kInvalidArgument, "no host in URL '{}'", url);
}

// Decodes chunked transfer encoding incrementally.
class Dechunker {
 public:
  // Appends decoded bytes to `out`; returns false at the terminating chunk.
  bool push(std::string_view in, std::string& out) {
    buf_.append(in);
    for (;;) {
      if (need_ == 0) {
        size_t eol = buf_.find("\r\n");
        if (eol == std::string::npos) return true;
        if (skip_crlf_) {
          buf_.erase(0, eol + 2);
          skip_crlf_ = false;
          continue;
        }
        need_ = std::strtoul(buf_.substr(0, eol).c_str(), nullptr, 16);
        buf_.erase(0, eol + 2);
        if (need_ == 0) return false;
      }
      size_t take = std::min(need_, buf_.size());
      out.append(buf_, 0, take);
      buf_.erase(0, take);
      need_ -= take;
      if (need_ > 0) return true;
      skip_crlf_ = true;
    }
  }

 private:
  std::string buf_;
  size_t need_ = 0;
  bool skip_crlf_ = false;
};

}  // namespace

HttpResult http_request(const std::string& url, const std::string& method, const std::string& path,
                        const std::string& body,
                        const std::function<bool(std::string_view)>& on_data,
                        const std::atomic<bool>* abort, int timeout_ms) {
  std::string host, port;
  parse_url(url, host, port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0)
    fail(ErrorKind::kIo, "cannot resolve {}: {}", host, gai_strerror(rc));
  Fd s;
  for (addrinfo* a = res; a; a = a->ai_next) {
    s.fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (s.fd >= 0 && ::connect(s.fd, a->ai_addr, a->ai_addrlen) == 0) break;
    if (s.fd >= 0) ::close(s.fd);
    s.fd = -1;
  }
  freeaddrinfo(res);
  if (s.fd < 0) fail(ErrorKind::kIo, "cannot connect to {}", url);

  std::string req = method + " " + path + " HTTP/1.1\r\nHost: " + host + ":" + port +
                    "\r\nConnection: close\r\nAccept: */*\r\n";
  if (!body.empty() || method == "POST")
    req +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  for (size_t off = 0; off < req.size();) {
    ssize_t n = ::send(s.fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n <= 0) fail(ErrorKind::kIo, "sending to {} failed", url);
    off += size_t(n);
  }

  HttpResult out;
  std::string head;
  bool in_body = false, chunked = false, done = false;
  Dechunker dechunk;
  auto deliver = [&](std::string_view bytes) {
    if (bytes.empty()) return;
    if (on_data) {
      if (!on_data(bytes)) done = true;
    } else {
      out.body.append(bytes);
    }
  };
  // Body bytes as they arrive: de-chunked when needed. False once a chunked body ended.
  auto body_bytes = [&](std::string_view data) {
    if (!chunked) {
      deliver(data);
      return true;
    }
    std::string decoded;
    bool more = dechunk.push(data, decoded);
    deliver(decoded);
    return more;
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[16384];
  while (!done) {
    if (abort && abort->load()) break;
    if (std::chrono::steady_clock::now() > deadline)
      fail(ErrorKind::kIo, "{} did not answer in time", url);
    pollfd p{s.fd, POLLIN, 0};
    int pr = ::poll(&p, 1, 50);
    if (pr == 0) continue;
    ssize_t n = ::recv(s.fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    std::string_view data(buf, size_t(n));
    if (!in_body) {
      head.append(data);
      size_t end = head.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      std::string headers = head.substr(0, end);
      if (headers.size() < 12) fail(ErrorKind::kIo, "malformed HTTP response from {}", url);
      out.status = std::atoi(headers.c_str() + 9);
      std::string lower = headers;
      for (auto& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
      chunked = lower.find("transfer-encoding: chunked") != std::string::npos;
      in_body = true;
      std::string rest = head.substr(end + 4);
      head.clear();
      if (!body_bytes(rest)) break;
      continue;
    }
    if (!body_bytes(data)) break;
  }
  if (!in_body && !(abort && abort->load())) fail(ErrorKind::kIo, "no HTTP response from {}", url);
  return out;
}

}  // namespace tandem::server
