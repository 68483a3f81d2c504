// tandem tokenize: text <-> token ids with the model's tokenizer, for people and scripts.
//   echo hi | tandem tokenize                 -> ids, space separated
//   tandem tokenize --json < strings.json     -> [[ids...], ...]
//   tandem tokenize --decode < ids.txt        -> text
//   tandem tokenize --decode --json           -> [[ids...], ...] in, ["text", ...] out
#include <time.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Opts {
  std::string model;
  bool json = false;
  bool decode = false;
  bool no_special = false;
  bool skip_special = false;
  int bench = 0;
};

// Encode speed on one core: the first pass in a fresh thread (empty word cache, as for a
// never-seen prompt) and the best of `reps` later passes (warm cache). Both wall time and
// the thread's CPU time are shown: on a shared machine the CPU time is what one core does.
double thread_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

int bench(const tandem::tok::Tokenizer& tok, const std::string& text, int reps) {
  using clock = std::chrono::steady_clock;
  auto secs = [](clock::duration d) { return std::chrono::duration<double>(d).count(); };
  size_t n_tokens = 0;
  double cold = 0, cold_cpu = 0;
  std::thread([&] {
    auto t0 = clock::now();
    double c0 = thread_cpu_s();
    n_tokens = tok.encode(text).size();
    cold_cpu = thread_cpu_s() - c0;
    cold = secs(clock::now() - t0);
  }).join();
  double best = 1e30, best_cpu = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = clock::now();
    double c0 = thread_cpu_s();
    size_t n = tok.encode(text).size();
    best_cpu = std::min(best_cpu, thread_cpu_s() - c0);
    best = std::min(best, secs(clock::now() - t0));
    if (n != n_tokens) return 1;
  }
  const double mb = double(text.size()) / 1e6;
  std::printf("bytes %zu tokens %zu\n", text.size(), n_tokens);
  std::printf("cold cache: wall %.2f ms (%.1f MB/s), cpu %.2f ms (%.1f MB/s, %.2f M tokens/s)\n",
              cold * 1e3, mb / cold, cold_cpu * 1e3, mb / cold_cpu,
              double(n_tokens) / cold_cpu / 1e6);
  std::printf(
      "warm cache: wall %.2f ms (%.1f MB/s), cpu %.2f ms (%.1f MB/s, %.2f M tokens/s), best of "
      "%d\n",
      best * 1e3, mb / best, best_cpu * 1e3, mb / best_cpu, double(n_tokens) / best_cpu / 1e6,
      reps);
  return 0;
}

std::string read_stdin() {
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

std::vector<tandem::tok::TokenId> parse_ids_text(const std::string& s) {
  std::vector<tandem::tok::TokenId> ids;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == ',' || c == '[' || c == ']') {
      ++i;
      continue;
    }
    size_t j = i;
    if (s[j] == '-') ++j;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    if (j == i || (j == i + 1 && s[i] == '-') || j - i > 11)
      tandem::fail(tandem::ErrorKind::kInvalidArgument, "not a token id at byte {}: '{}'", i,
                   s.substr(i, 20));
    long long v = std::stoll(s.substr(i, j - i));
    if (v < INT32_MIN || v > INT32_MAX)
      tandem::fail(tandem::ErrorKind::kInvalidArgument, "token id out of range: {}", v);
    ids.push_back(tandem::tok::TokenId(v));
    i = j;
  }
  return ids;
}

int run(const Opts& o) {
  using namespace tandem;
  using nlohmann::json;
  auto tok = tok::load_tokenizer(o.model);
  std::string in = read_stdin();
  if (o.bench > 0) return bench(*tok, in, o.bench);
  if (o.json) {
    json j = json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_array())
      fail(ErrorKind::kInvalidArgument, "{}",
           o.decode ? "--decode --json expects a JSON array of id arrays on stdin"
                    : "--json expects a JSON array of strings on stdin");
    json out = json::array();
    for (size_t k = 0; k < j.size(); ++k) {
      const json& e = j[k];
      if (o.decode) {
        if (!e.is_array()) fail(ErrorKind::kInvalidArgument, "item {} is not an array of ids", k);
        std::vector<tok::TokenId> ids;
        for (const auto& v : e) {
          if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN ||
              v.get<int64_t>() > INT32_MAX)
            fail(ErrorKind::kInvalidArgument, "item {} holds a value that is not a token id", k);
          ids.push_back(v.get<tok::TokenId>());
        }
        out.push_back(tok->decode(ids, o.skip_special));
      } else {
        if (!e.is_string()) fail(ErrorKind::kInvalidArgument, "item {} is not a string", k);
        out.push_back(tok->encode(e.get_ref<const std::string&>(), !o.no_special));
      }
    }
    std::string s = out.dump(-1, ' ', false, json::error_handler_t::replace);
    std::printf("%s\n", s.c_str());
    return 0;
  }
  if (o.decode) {
    std::string s = tok->decode(parse_ids_text(in), o.skip_special);
    std::fwrite(s.data(), 1, s.size(), stdout);
    return 0;
  }
  auto ids = tok->encode(in, !o.no_special);
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ' ';
    s += std::to_string(ids[i]);
  }
  std::printf("%s\n", s.c_str());
  return 0;
}

}  // namespace

TANDEM_COMMAND(tokenize, 70, "Text to token ids and back (stdin to stdout)",
               [](CLI::App& sub) -> tandem::cli::RunFn {
                 auto o = std::make_shared<Opts>();
                 sub.add_option("--model", o->model,
                                "Model folder with tokenizer.json (default: the pinned Qwen3 "
                                "tokenizer)");
                 sub.add_flag("--json", o->json,
                              "stdin is a JSON array of strings; print a JSON array of id arrays "
                              "(with --decode: the reverse)");
                 sub.add_flag("--decode", o->decode,
                              "stdin holds token ids (space/comma separated); print the text");
                 sub.add_flag("--no-special", o->no_special,
                              "Tokenize special-token text (e.g. <|im_start|>) as plain text");
                 sub.add_flag("--skip-special", o->skip_special,
                              "With --decode: leave special tokens out of the text");
                 sub.add_option("--bench", o->bench,
                                "Benchmark: encode stdin this many times on one core and print "
                                "the speed")
                     ->check(CLI::Range(1, 1000));
                 return [o] { return run(*o); };
               });
