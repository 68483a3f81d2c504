#include "server/web_chat.h"

#include <cstdlib>

namespace tandem::server {

std::filesystem::path default_data_dir() {
  if (const char* d = std::getenv("TANDEM_DATA_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x)
    return std::filesystem::path(x) / "tandem";
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::filesystem::path(h) / ".local" / "share" / "tandem";
  return std::filesystem::path(".tandem");
}

WebChat::WebChat(ServerContext& ctx, const std::filesystem::path& data_dir, AnswerHubOptions opt)
    : ctx_(ctx), file_(data_dir / "conversations.db") {
  store_ = std::make_unique<store::ConversationStore>(file_);
  hub_ = std::make_unique<AnswerHub>(ctx_, *store_, opt);
  ctx_.conversations = store_.get();
  ctx_.answers = hub_.get();
}

WebChat::~WebChat() {
  ctx_.answers = nullptr;
  ctx_.conversations = nullptr;
  hub_.reset();
  store_.reset();
}

}  // namespace tandem::server
