#pragma once
// Shared by the web page's server tests: a thread-safe scripted engine (the answer hub polls
// on its own thread while the test steps the engine), a temporary data folder, and a reader
// of the answer streams' Server-Sent Events.
#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "fake_generator.h"
#include "store/conversation_store.h"

namespace tandem::server::testing {

class LockedFake : public Generator {
 public:
  explicit LockedFake(FakeGenerator::Script s) : fake_(std::move(s)) {}
  std::shared_ptr<engine::RequestHandle> submit(engine::Request r) override {
    std::lock_guard lock(mu_);
    return fake_.submit(std::move(r));
  }
  void cancel(engine::RequestId id) override {
    std::lock_guard lock(mu_);
    fake_.cancel(id);
  }
  int max_model_len() const override { return 4096; }
  engine::EngineStats stats() const override {
    std::lock_guard lock(mu_);
    return fake_.stats();
  }
  bool step() {
    std::lock_guard lock(mu_);
    return fake_.step();
  }
  int cancels() {
    std::lock_guard lock(mu_);
    return fake_.cancels;
  }
  std::vector<engine::Request> submitted() {
    std::lock_guard lock(mu_);
    return fake_.submitted;
  }

 private:
  mutable std::mutex mu_;
  FakeGenerator fake_;
};

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("tandem_web_" + std::to_string(::getpid()) + "_" + store::new_store_id(""));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

struct SseEvent {
  std::string event, data, id;
};

inline std::vector<SseEvent> parse_sse(const std::string& s) {
  std::vector<SseEvent> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find("\n\n", pos);
    if (end == std::string::npos) break;
    SseEvent e;
    std::string block = s.substr(pos, end - pos);
    pos = end + 2;
    size_t lp = 0;
    while (lp < block.size()) {
      size_t nl = block.find('\n', lp);
      if (nl == std::string::npos) nl = block.size();
      std::string line = block.substr(lp, nl - lp);
      lp = nl + 1;
      if (line.rfind("event: ", 0) == 0) e.event = line.substr(7);
      if (line.rfind("data: ", 0) == 0) e.data = line.substr(6);
      if (line.rfind("id: ", 0) == 0) e.id = line.substr(4);
    }
    out.push_back(e);
  }
  return out;
}

// Waits (bounded) for `pred`, stepping the engine meanwhile.
template <typename Pred>
bool step_until(LockedFake& gen, Pred pred, int max_ms = 5000) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(max_ms);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    gen.step();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return pred();
}

}  // namespace tandem::server::testing
