#include <chrono>
#include <ctime>
#include <mutex>
#include <random>

#include <fmt/format.h>

#include "core/rng.h"
#include "server/api_error.h"
#include "server/formatter.h"

namespace tandem::server {

std::string random_id(const char* prefix, int len) {
  static std::mutex mu;
  static Rng rng(std::random_device{}() ^
                 uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()));
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string s = prefix;
  std::lock_guard lock(mu);
  for (int i = 0; i < len; ++i) s += kChars[rng.next() % 62];
  return s;
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string rfc3339_now() {
  auto now = std::chrono::system_clock::now();
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  std::time_t secs = std::time_t(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ns % 1000000000);
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string openai_error_body(int status, const std::string& msg, const std::string& param,
                              const std::string& code, const std::string& type) {
  json e = {{"message", msg},
            {"type", type.empty() ? openai_type_of(status) : type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}};
  return dump(json{{"error", e}});
}

std::string ollama_error_body(const std::string& msg) {
  return dump(json{{"error", msg}});
}

}  // namespace tandem::server
