// tandem ps: the models a running server has loaded, as `ollama ps` shows them.
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/store_cli.h"
#include "core/error.h"
#include "server/http_client.h"

namespace {
struct Opts {
  std::string url;
};

// OLLAMA_HOST as Ollama's clients read it ("0.0.0.0:11434", "http://host:port", "host"),
// else the default address.
std::string default_url() {
  std::string h = std::getenv("OLLAMA_HOST") ? std::getenv("OLLAMA_HOST") : "";
  if (h.empty()) return "http://127.0.0.1:11434";
  if (h.rfind("http://", 0) == 0) h = h.substr(7);
  while (!h.empty() && h.back() == '/') h.pop_back();
  std::string host = h, port = "11434";
  if (auto c = h.rfind(':'); c != std::string::npos && h.find(']', c) == std::string::npos) {
    host = h.substr(0, c);
    port = h.substr(c + 1);
  }
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  return "http://" + host + ":" + port;
}

std::string until(const std::string& t) {
  std::tm tm{};
  if (t.size() < 19 || !strptime(t.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return t;
  const double s = std::difftime(timegm(&tm), std::time(nullptr));
  if (s > 86400.0 * 365 * 100) return "Forever";
  if (s < 1) return "Now (unloading when idle)";
  if (s < 60) return "Less than a minute from now";
  if (s < 3600) return fmt::format("{} minutes from now", int(s / 60));
  if (s < 86400 * 2) return fmt::format("{} hours from now", int(s / 3600));
  return fmt::format("{} days from now", int(s / 86400));
}

int run_ps(const Opts& o) {
  using namespace tandem;
  const std::string url = o.url.empty() ? default_url() : o.url;
  auto r = server::http_request(url, "GET", "/api/ps", "", {}, nullptr, 10000);
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (r.status != 200 || !j.is_object() || !j.contains("models"))
    fail(ErrorKind::kIo, "{}/api/ps answered {}: {}", url, r.status, r.body.substr(0, 200));
  std::string out = fmt::format("{:<28}  {:<12}  {:<8}  {:<9}  {:<8}  {}\n", "NAME", "ID", "SIZE",
                                "PROCESSOR", "CONTEXT", "UNTIL");
  for (auto& m : j["models"]) {
    const uint64_t size = m.value("size", uint64_t(0)), vram = m.value("size_vram", uint64_t(0));
    std::string digest = m.value("digest", "");
    if (digest.rfind("sha256:", 0) == 0) digest = digest.substr(7);
    out += fmt::format("{:<28}  {:<12}  {:<8}  {:<9}  {:<8}  {}\n", m.value("name", ""),
                       digest.substr(0, 12), cli::human_bytes(size),
                       vram > 0 ? "100% GPU" : "100% CPU", m.value("context_length", 0),
                       until(m.value("expires_at", "")));
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}
}  // namespace

TANDEM_COMMAND(ps, 27, "List the models a running server has loaded",
               [](CLI::App& sub) -> tandem::cli::RunFn {
                 auto o = std::make_shared<Opts>();
                 sub.add_option("--url", o->url,
                                "Server (default: $OLLAMA_HOST, else http://127.0.0.1:11434)");
                 return [o] { return run_ps(*o); };
               });
