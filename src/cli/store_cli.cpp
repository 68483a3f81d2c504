#include "cli/store_cli.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>

#include <fmt/format.h>

namespace tandem::cli {

void add_models_dir_option(CLI::App& sub, std::string& dir) {
  sub.add_option("--models-dir", dir,
                 "Model store folder (default: $TANDEM_MODELS, else " +
                     store::ModelStore::default_dir().string() + ")");
}

store::ModelStore open_store(const std::string& models_dir) {
  return store::ModelStore(store::ModelStore::resolve_dir(models_dir));
}

std::string human_bytes(uint64_t n) {
  const double x = double(n);
  if (x >= 1e9) return fmt::format("{:.1f} GB", x / 1e9);
  if (x >= 1e6) return fmt::format("{:.0f} MB", x / 1e6);
  if (x >= 1e3) return fmt::format("{:.0f} KB", x / 1e3);
  return fmt::format("{} B", n);
}

std::string human_age(const std::string& t) {
  std::tm tm{};
  if (t.size() < 19 || !strptime(t.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return t;
  const std::time_t then = timegm(&tm);
  const double s = std::difftime(std::time(nullptr), then);
  auto ago = [](double v, const char* unit) {
    int n = int(v);
    return fmt::format("{} {}{} ago", n, unit, n == 1 ? "" : "s");
  };
  if (s < 60) return "Less than a minute ago";
  if (s < 3600) return ago(s / 60, "minute");
  if (s < 86400) return ago(s / 3600, "hour");
  if (s < 86400 * 14) return ago(s / 86400, "day");
  if (s < 86400 * 60) return ago(s / (86400 * 7), "week");
  if (s < 86400 * 365 * 2) return ago(s / (86400 * 30), "month");
  return ago(s / (86400 * 365), "year");
}

ProgressBar::ProgressBar() : tty_(isatty(STDERR_FILENO) != 0) {}

ProgressBar::~ProgressBar() {
  finish();
}

store::ProgressFn ProgressBar::fn() {
  return [this](const store::ProgressEvent& e) { on(e); };
}

void ProgressBar::finish() {
  if (drawn_ && tty_) std::fputs("\n", stderr);
  drawn_ = false;
}

void ProgressBar::on(const store::ProgressEvent& e) {
  const auto now = std::chrono::steady_clock::now();
  if (e.file != file_ || e.stage != stage_) {
    finish();
    file_ = e.file;
    stage_ = e.stage;
    start_ = now;
    last_draw_ = {};
  }
  total_ = e.total;
  const bool last = e.done >= e.total;
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double rate = secs > 0 ? double(e.done) / secs : 0;
  if (!tty_) {
    if (last)
      std::fprintf(stderr, "%s %s: %s%s\n", e.stage.c_str(), e.file.c_str(),
                   human_bytes(e.done).c_str(),
                   secs > 0.2 ? fmt::format(" at {}/s", human_bytes(uint64_t(rate))).c_str() : "");
    return;
  }
  if (!last && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const int width = 24;
  const double frac = e.total ? double(e.done) / double(e.total) : 1.0;
  const int fill = int(frac * width);
  std::string bar(size_t(fill), '=');
  if (fill < width) bar += '>' + std::string(size_t(width - fill - 1), ' ');
  std::fprintf(stderr, "\r%-9s %-32.32s %3d%% [%s] %s/%s  %s/s\x1b[K", e.stage.c_str(),
               e.file.c_str(), int(frac * 100), bar.c_str(), human_bytes(e.done).c_str(),
               human_bytes(e.total).c_str(), human_bytes(uint64_t(rate)).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace tandem::cli
