#pragma once
// Logging through spdlog (header-only). Library code logs; it never prints to stdout,
// which belongs to command output.
#include <spdlog/spdlog.h>

namespace tandem {
// Sends logs to stderr at the given level ("debug", "info", "warn", "error").
void init_logging(const std::string& level);
}  // namespace tandem
