#pragma once
// The web page's conversations, kept by the server in SQLite (WAL, foreign keys on, the
// schema of conversation_schema.h). Every call names an owner: the name of the caller's API
// key ("" when the server has no keys). An owner sees, changes and searches only its own
// conversations; another owner's id reads as not found.
//
// A conversation's messages form a tree: editing a user message or regenerating an answer
// adds a sibling, so earlier branches stay. `leaf_id` is the last message of the branch on
// show; the path from the root to it is the chat.
//
// Thread-safe: one connection behind a mutex (calls are short; the HTTP threads and the
// answer runner share it). Each change is one transaction, so a crash or kill -9 loses at
// most the change in progress and never leaves a half-written one.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/conversation_schema.h"
#include "store/conversation_sqlite.h"

namespace tandem::store {

using json = nlohmann::ordered_json;

struct ConversationRecord {
  std::string id;
  std::string title;
  json settings = json::object();  // the page's settings for this chat (model, sampling...)
  std::string leaf_id;             // "" when it has no messages
  int64_t created_ms = 0, updated_ms = 0;
  int64_t message_count = 0;
};

// Message states: an answer is "streaming" while it is generated, then "done", "stopped"
// (the user stopped it), "error", or "interrupted" (the server stopped before it finished).
struct MessageRecord {
  std::string id;
  std::string parent_id;  // "" for a first message
  std::string role;       // system | user | assistant | tool
  std::string content;
  std::string reasoning;
  std::string status = "done";
  json meta = json::object();  // timings, token counts, the settings the answer used
  int64_t created_ms = 0, updated_ms = 0;
};

struct ConversationPage {
  std::vector<ConversationRecord> items;
  std::string next_cursor;  // "" on the last page
};

struct SearchHit {
  ConversationRecord conversation;
  std::string message_id;  // "" when the title matched
  // Text around the match, the matched terms between \x02 and \x03.
  std::string snippet;
};

// Limits on what one owner can store through the API.
inline constexpr size_t kMaxTitleBytes = 512;
inline constexpr size_t kMaxMessageBytes = 4u << 20;
inline constexpr size_t kMaxImportMessages = 20000;

class ConversationStore {
 public:
  // Opens or creates `file` and brings its schema up to date (see migrate_conversations).
  // Answers left "streaming" by a server that stopped become "interrupted".
  explicit ConversationStore(const std::filesystem::path& file);
  ~ConversationStore();

  ConversationRecord create(const std::string& owner, const std::string& title,
                            const json& settings = json::object());
  std::optional<ConversationRecord> get(const std::string& owner, const std::string& id);
  // Most recently updated first. `cursor` is a page's next_cursor ("" for the first page);
  // a malformed cursor is an Error(kInvalidArgument).
  ConversationPage list(const std::string& owner, int limit, const std::string& cursor = {});
  // Full-text search of titles, messages and reasoning; every word of `query` must match
  // (as a prefix). Best matches first, one hit per conversation.
  std::vector<SearchHit> search(const std::string& owner, const std::string& query, int limit);
  // False when the owner has no such conversation.
  bool rename(const std::string& owner, const std::string& id, const std::string& title);
  bool set_settings(const std::string& owner, const std::string& id, const json& settings);
  // Shows the branch ending at `leaf_id`, which must be a message of the conversation.
  bool set_leaf(const std::string& owner, const std::string& id, const std::string& leaf_id);
  bool remove(const std::string& owner, const std::string& id);

  // Every message of the conversation (all branches), oldest first; nullopt when not found.
  std::optional<std::vector<MessageRecord>> messages(const std::string& owner,
                                                     const std::string& id);
  // One message of the owner's conversation.
  std::optional<MessageRecord> message(const std::string& owner, const std::string& id,
                                       const std::string& message_id);
  // The path from the root to `message_id` (inclusive), root first.
  std::vector<MessageRecord> path_to(const std::string& owner, const std::string& id,
                                     const std::string& message_id);
  // Adds a message under `m.parent_id` (which must be in the conversation, or "") and
  // shows it (leaf_id). Fills in id and times. Error(kNotFound) for an unknown
  // conversation or parent.
  MessageRecord add_message(const std::string& owner, const std::string& id, MessageRecord m);
  // Replaces a message's text, status and meta (an answer as it is generated).
  bool update_message(const std::string& message_id, const std::string& content,
                      const std::string& reasoning, const std::string& status, const json& meta);
  // Removes a message and everything under it; the chat shows the parent's branch.
  bool delete_message(const std::string& owner, const std::string& id,
                      const std::string& message_id);

  // {"format":"tandem.conversation","version":1,"conversation":{...},"messages":[...]}.
  std::optional<json> export_json(const std::string& owner, const std::string& id);
  // Stores an exported conversation under new ids; returns the new conversation's id.
  // Validates everything first (roles, parents, sizes): bad input is an
  // Error(kInvalidArgument) and stores nothing.
  std::string import_json(const std::string& owner, const json& j);

  int schema_version();
  // PRAGMA integrity_check plus the FTS indexes' own checks: "ok" or what is wrong.
  std::string check_integrity();

 private:
  std::optional<ConversationRecord> get_locked(const std::string& owner, const std::string& id);
  void touch_locked(const std::string& id, int64_t now);

  std::mutex mu_;
  std::unique_ptr<sql::Db> db_;
};

// A fresh random id: `prefix` + 20 characters of [0-9a-z].
std::string new_store_id(const char* prefix);

}  // namespace tandem::store
