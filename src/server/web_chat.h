#pragma once
// What the web page needs besides its files: the conversation store (SQLite under the data
// folder) and the answer hub, wired into the ServerContext for the /ui/api/ routes. Owned by
// `tandem serve`; destroyed before the engine (running answers are stored as interrupted).
#include <filesystem>
#include <memory>

#include "server/answer_hub.h"
#include "server/context.h"
#include "store/conversation_store.h"

namespace tandem::server {

// $TANDEM_DATA_DIR, else $XDG_DATA_HOME/tandem, else ~/.local/share/tandem.
std::filesystem::path default_data_dir();

class WebChat {
 public:
  // Opens <data_dir>/conversations.db; throws tandem::Error naming the file when it cannot.
  WebChat(ServerContext& ctx, const std::filesystem::path& data_dir, AnswerHubOptions opt = {});
  ~WebChat();
  const std::filesystem::path& db_file() const { return file_; }

 private:
  ServerContext& ctx_;
  std::filesystem::path file_;
  std::unique_ptr<store::ConversationStore> store_;
  std::unique_ptr<AnswerHub> hub_;
};

}  // namespace tandem::server
