// tandem run: chat in the terminal (like `ollama run`), or answer one prompt for scripts.
// It talks to a running server (--url); when none answers and --model is given, it starts
// the engine and server in-process on a free loopback port and talks to that.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "server/http_client.h"
#include "server/http_server.h"
#include "server/model_host.h"

namespace {

using json = nlohmann::ordered_json;
std::atomic<bool> g_interrupt{false};
void on_sigint(int) {
  g_interrupt = true;
}

struct Opts {
  std::string url = "http://127.0.0.1:11434";
  std::string model_path;
  std::string model_name;
  std::string system;
  std::string thinking;  // "" = server default, "on", "off"
  double temperature = -1;
  int max_tokens = 0;
  bool show_thinking = false;
  std::vector<std::string> prompt;
};

bool server_answers(const std::string& url) {
  try {
    auto r = tandem::server::http_request(url, "GET", "/api/version", "", {}, nullptr, 2000);
    return r.status == 200;
  } catch (const tandem::Error&) {
    return false;
  }
}

// Streams one /api/chat turn; prints thinking dimmed (to stderr when not interactive) and
// the answer to stdout. Returns the answer text; Ctrl+C stops it early.
std::string chat_turn(const Opts& o, const json& messages, std::optional<bool> think,
                      bool interactive, bool show_thinking) {
  json req = {{"model", o.model_name}, {"messages", messages}, {"stream", true}};
  if (think) req["think"] = *think;
  json options = json::object();
  if (o.temperature >= 0) options["temperature"] = o.temperature;
  if (o.max_tokens > 0) options["num_predict"] = o.max_tokens;
  if (!options.empty()) req["options"] = options;
  std::string answer, line_buf, error;
  bool in_thinking = false;
  const bool tty = interactive && isatty(STDOUT_FILENO);
  g_interrupt = false;
  auto on_data = [&](std::string_view bytes) {
    line_buf.append(bytes);
    size_t nl;
    while ((nl = line_buf.find('\n')) != std::string::npos) {
      json j = json::parse(line_buf.substr(0, nl), nullptr, false);
      line_buf.erase(0, nl + 1);
      if (j.is_discarded()) continue;
      if (j.contains("error")) {
        error = j["error"].is_string() ? j["error"].get<std::string>() : j["error"].dump();
        continue;
      }
      if (!j.contains("message")) continue;
      auto& m = j["message"];
      std::string t = m.value("thinking", "");
      std::string c = m.value("content", "");
      if (!t.empty() && show_thinking) {
        if (tty && !in_thinking) std::fputs("\x1b[2m", stdout);
        in_thinking = true;
        std::fputs(t.c_str(), tty ? stdout : stderr);
      }
      if (!c.empty()) {
        if (in_thinking) {
          if (tty)
            std::fputs("\x1b[0m\n\n", stdout);
          else
            std::fputs("\n", stderr);
          in_thinking = false;
        }
        std::fputs(c.c_str(), stdout);
        answer += c;
      }
      std::fflush(stdout);
    }
    return true;
  };
  auto r =
      tandem::server::http_request(o.url, "POST", "/api/chat", req.dump(), on_data, &g_interrupt);
  if (in_thinking && tty) std::fputs("\x1b[0m", stdout);
  if (r.status != 200 && r.status != 0) {
    json j = json::parse(line_buf + r.body, nullptr, false);
    error = !j.is_discarded() && j.contains("error") ? j["error"].dump() : line_buf;
  }
  std::fputs("\n", stdout);
  if (g_interrupt) std::fputs(tty ? "\x1b[2m(stopped)\x1b[0m\n" : "(stopped)\n", stderr);
  if (!error.empty()) tandem::fail(tandem::ErrorKind::kIo, "server error: {}", error);
  return answer;
}

int run(Opts& o) {
  using namespace tandem;
  std::unique_ptr<server::ModelHost> host;
  std::unique_ptr<server::Router> router;
  std::unique_ptr<server::HttpServer> srv;
  std::thread srv_thread;
  if (!server_answers(o.url)) {
    if (o.model_path.empty())
      fail(ErrorKind::kIo, "no tandem server answers at {}; start `tandem serve` or pass --model",
           o.url);
    server::ModelHostOptions mo;
    mo.model = o.model_path;
    host = server::load_model_host(mo);
    router = std::make_unique<server::Router>(host->ctx);
    server::HttpServerOptions ho;
    ho.port = 0;
    srv = std::make_unique<server::HttpServer>(*router, ho);
    o.url = "http://127.0.0.1:" + std::to_string(srv->port());
    srv_thread = std::thread([&] { srv->run(); });
  }
  struct Stop {
    server::HttpServer* s;
    std::thread& t;
    ~Stop() {
      if (s) s->stop();
      if (t.joinable()) t.join();
    }
  } stop{srv.get(), srv_thread};

  if (o.model_name.empty()) {
    auto r = server::http_request(o.url, "GET", "/v1/models", "");
    json j = json::parse(r.body, nullptr, false);
    if (j.is_discarded() || !j.contains("data") || j["data"].empty())
      fail(ErrorKind::kIo, "{} lists no models", o.url);
    o.model_name = j["data"][0]["id"];
  }
  std::optional<bool> think;
  if (o.thinking == "on") think = true;
  if (o.thinking == "off") think = false;
  std::signal(SIGINT, on_sigint);

  json messages = json::array();
  if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});

  const bool interactive = o.prompt.empty() && isatty(STDIN_FILENO);
  if (!interactive) {
    std::string prompt;
    for (auto& w : o.prompt) prompt += (prompt.empty() ? "" : " ") + w;
    if (prompt.empty()) {
      std::string line;
      while (std::getline(std::cin, line)) prompt += line + "\n";
    }
    if (prompt.empty())
      fail(ErrorKind::kInvalidArgument, "no prompt (give it as arguments or on stdin)");
    messages.push_back({{"role", "user"}, {"content", prompt}});
    chat_turn(o, messages, think, false, o.show_thinking);
    return 0;
  }

  std::printf(
      "tandem run: chatting with %s at %s\n"
      "  /think /no_think  thinking on/off    /set temperature X | /set system TEXT\n"
      "  /clear  forget the conversation      Ctrl+C stops an answer, Ctrl+D exits\n",
      o.model_name.c_str(), o.url.c_str());
  std::string line;
  for (;;) {
    std::fputs(">>> ", stdout);
    std::fflush(stdout);
    g_interrupt = false;
    if (!std::getline(std::cin, line)) {
      if (g_interrupt) {  // Ctrl+C at the prompt: a fresh line, keep going
        std::cin.clear();
        std::fputs("\n", stdout);
        continue;
      }
      std::fputs("\n", stdout);
      break;
    }
    if (line.empty()) continue;
    if (line == "/bye" || line == "/exit") break;
    if (line == "/think") {
      think = true;
      std::puts("thinking on");
      continue;
    }
    if (line == "/no_think") {
      think = false;
      std::puts("thinking off");
      continue;
    }
    if (line == "/clear") {
      messages = json::array();
      if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
      std::puts("conversation cleared");
      continue;
    }
    if (line.rfind("/set ", 0) == 0) {
      std::string rest = line.substr(5);
      if (rest.rfind("temperature ", 0) == 0) {
        o.temperature = std::atof(rest.c_str() + 12);
        std::printf("temperature %.2f\n", o.temperature);
      } else if (rest.rfind("system ", 0) == 0) {
        o.system = rest.substr(7);
        if (!messages.empty() && messages[0]["role"] == "system")
          messages[0]["content"] = o.system;
        else
          messages.insert(messages.begin(), json{{"role", "system"}, {"content", o.system}});
        std::puts("system message set");
      } else {
        std::puts("usage: /set temperature X | /set system TEXT");
      }
      continue;
    }
    if (line[0] == '/' && line.find(' ') == std::string::npos) {
      std::printf("unknown command %s\n", line.c_str());
      continue;
    }
    messages.push_back({{"role", "user"}, {"content", line}});
    try {
      std::string answer = chat_turn(o, messages, think, true, true);
      messages.push_back({{"role", "assistant"}, {"content", answer}});
    } catch (const Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      messages.erase(messages.end() - 1);
    }
  }
  return 0;
}

}  // namespace

TANDEM_COMMAND(run, 20, "Interactive chat in the terminal (or one prompt from args/stdin)",
               [](CLI::App& sub) -> tandem::cli::RunFn {
                 auto o = std::make_shared<Opts>();
                 sub.add_option("--url", o->url, "Server to talk to");
                 sub.add_option("--model", o->model_path,
                                "Model folder to serve in-process when no server answers");
                 sub.add_option("--model-name", o->model_name,
                                "Model name to request (default: the server's first)");
                 sub.add_option("--system", o->system, "System message");
                 sub.add_option("--thinking", o->thinking, "on or off (default: the server's)")
                     ->check(CLI::IsMember({"on", "off"}));
                 sub.add_option("--temperature", o->temperature, "Sampling temperature")
                     ->check(CLI::Range(0.0, 2.0));
                 sub.add_option("--max-tokens", o->max_tokens, "Tokens per answer at most")
                     ->check(CLI::Range(1, 1 << 24));
                 sub.add_flag("--show-thinking", o->show_thinking,
                              "One-shot: print the thinking to stderr");
                 sub.add_option("prompt", o->prompt,
                                "One-shot prompt (else read from stdin when it is not a terminal)");
                 return [o] { return run(*o); };
               });
