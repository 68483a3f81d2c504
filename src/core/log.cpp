#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace tandem {
void init_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("tandem");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
}
}  // namespace tandem
