// HttpServer over a generator whose own thread keeps publishing tokens (as the engine
// thread does): stopping and destroying the server while streams are live must not crash.
// The engine outlives the server in `tandem serve`, so its notifiers keep firing while the
// server's io_context shuts down; they must never touch it once it is gone.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "fake_generator.h"
#include "server/http_server.h"
#include "server/router.h"

using namespace tandem;
using namespace tandem::server;

namespace {

// Every live request gets a token per round from the pusher thread; none ever finishes.
class BusyGenerator : public Generator {
 public:
  std::shared_ptr<engine::RequestHandle> submit(engine::Request) override {
    std::lock_guard lock(mu_);
    auto h = std::make_shared<engine::RequestHandle>(next_id_++);
    live_.push_back(h);
    return h;
  }
  void cancel(engine::RequestId) override {}
  int max_model_len() const override { return 4096; }
  engine::EngineStats stats() const override { return {}; }

  void start(engine::TokenId token) {
    pusher_ = std::thread([this, token] {
      while (!stop_.load()) {
        std::vector<std::shared_ptr<engine::RequestHandle>> hs;
        {
          std::lock_guard lock(mu_);
          hs = live_;
        }
        for (auto& h : hs) {
          engine::Event e;
          e.token = token;
          h->push(e);  // calls the server's notifier, on this thread
        }
        if (hs.empty()) std::this_thread::yield();
      }
    });
  }
  void stop() {
    stop_ = true;
    if (pusher_.joinable()) pusher_.join();
  }
  ~BusyGenerator() override { stop(); }

 private:
  std::mutex mu_;
  std::vector<std::shared_ptr<engine::RequestHandle>> live_;
  engine::RequestId next_id_ = 1;
  std::atomic<bool> stop_{false};
  std::thread pusher_;
};

// Opens a streamed chat request and waits for its first bytes; returns the socket.
int open_stream(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  const std::string body =
      R"({"model":"tiny","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":4000})";
  const std::string req =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  if (::write(fd, req.data(), req.size()) != ssize_t(req.size())) {
    ::close(fd);
    return -1;
  }
  char buf[4096];
  if (::read(fd, buf, sizeof buf) <= 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

TEST(HttpServer, StopsCleanlyWhileTheEngineKeepsPublishingToLiveStreams) {
  auto tok = tok::load_tokenizer("");
  const engine::TokenId token = tok->encode("hello", true).at(0);
  for (int round = 0; round < 20; ++round) {
    BusyGenerator gen;  // outlives the server, as the engine does in `tandem serve`
    ServerContext ctx = tandem::server::testing::test_context(gen, tok);
    Router router(ctx);
    gen.start(token);
    std::vector<int> clients;
    {
      HttpServerOptions o;
      o.port = 0;
      o.threads = 2;
      HttpServer srv(router, o);
      std::thread io([&] { srv.run(); });
      for (int i = 0; i < 4; ++i) {
        int fd = open_stream(srv.port());
        ASSERT_GE(fd, 0) << "round " << round << ": no stream";
        clients.push_back(fd);
      }
      srv.stop();
      io.join();
    }  // the server (and its io_context) goes away while the pusher still publishes
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    gen.stop();
    for (int fd : clients) ::close(fd);
  }
}
