#include "store/conversation_store.h"

#include <chrono>
#include <random>

#include <unistd.h>

#include "core/error.h"

namespace tandem::store {
namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json parse_json_column(const std::string& s) {
  json j = json::parse(s, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void check_title(const std::string& title) {
  if (title.size() > kMaxTitleBytes)
    fail(ErrorKind::kInvalidArgument, "a title is at most {} bytes (got {})", kMaxTitleBytes,
         title.size());
}

// Each word of the query as a quoted FTS5 prefix term; quotes inside are dropped so no
// user text is read as FTS syntax.
std::string fts_query(const std::string& q) {
  std::string out, word;
  auto flush = [&] {
    if (word.empty()) return;
    if (!out.empty()) out += ' ';
    out += '"' + word + "\"*";
    word.clear();
  };
  for (char c : q) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
      flush();
    else if (c != '"')
      word += c;
  }
  flush();
  return out;
}

constexpr const char* kConvColumns =
    "c.id, c.title, c.settings, coalesce(c.leaf_id, ''), c.created_ms, c.updated_ms, "
    "(SELECT count(*) FROM messages m WHERE m.conversation_id = c.id)";

ConversationRecord read_conversation(sql::Stmt& s, int col = 0) {
  ConversationRecord r;
  r.id = s.text(col);
  r.title = s.text(col + 1);
  r.settings = parse_json_column(s.text(col + 2));
  r.leaf_id = s.text(col + 3);
  r.created_ms = s.int64(col + 4);
  r.updated_ms = s.int64(col + 5);
  r.message_count = s.int64(col + 6);
  return r;
}

constexpr const char* kMsgColumns =
    "id, coalesce(parent_id, ''), role, content, reasoning, status, meta, created_ms, "
    "updated_ms";

MessageRecord read_message(sql::Stmt& s) {
  MessageRecord m;
  m.id = s.text(0);
  m.parent_id = s.text(1);
  m.role = s.text(2);
  m.content = s.text(3);
  m.reasoning = s.text(4);
  m.status = s.text(5);
  m.meta = parse_json_column(s.text(6));
  m.created_ms = s.int64(7);
  m.updated_ms = s.int64(8);
  return m;
}

}  // namespace

std::string new_store_id(const char* prefix) {
  // Reseeded in a forked child, which would otherwise repeat its parent's ids.
  static thread_local std::mt19937_64 rng;
  static thread_local pid_t seeded_for = 0;
  if (seeded_for != ::getpid()) {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd()};
    rng.seed(seq);
    seeded_for = ::getpid();
  }
  static constexpr char kAlphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string id = prefix;
  for (int i = 0; i < 20; ++i) id += kAlphabet[rng() % 36];
  return id;
}

ConversationStore::ConversationStore(const std::filesystem::path& file) {
  std::error_code ec;
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path(), ec);
  db_ = std::make_unique<sql::Db>(file);
  // WAL: readers never block the writer, and a commit is one append; with synchronous=NORMAL
  // a killed process loses nothing committed (only a power cut may lose the last commits).
  db_->exec("PRAGMA journal_mode = WAL");
  db_->exec("PRAGMA synchronous = NORMAL");
  db_->exec("PRAGMA foreign_keys = ON");
  migrate_conversations(*db_);
  sql::Stmt s(*db_, "UPDATE messages SET status = 'interrupted' WHERE status = 'streaming'");
  s.run();
}

ConversationStore::~ConversationStore() = default;

int ConversationStore::schema_version() {
  std::lock_guard lock(mu_);
  return conversation_schema_version(*db_);
}

ConversationRecord ConversationStore::create(const std::string& owner, const std::string& title,
                                             const json& settings) {
  check_title(title);
  std::lock_guard lock(mu_);
  ConversationRecord r;
  r.id = new_store_id("c_");
  r.title = title;
  r.settings = settings.is_object() ? settings : json::object();
  r.created_ms = r.updated_ms = now_ms();
  sql::Stmt s(*db_,
              "INSERT INTO conversations(id, owner, title, settings, created_ms, updated_ms) "
              "VALUES (?, ?, ?, ?, ?, ?)");
  s.bind(1, r.id).bind(2, owner).bind(3, title).bind(4, dump_json(r.settings));
  s.bind(5, r.created_ms).bind(6, r.updated_ms).run();
  return r;
}

std::optional<ConversationRecord> ConversationStore::get_locked(const std::string& owner,
                                                                const std::string& id) {
  sql::Stmt s(*db_, std::string("SELECT ") + kConvColumns +
                        " FROM conversations c WHERE c.id = ? AND c.owner = ?");
  s.bind(1, id).bind(2, owner);
  if (!s.step()) return std::nullopt;
  return read_conversation(s);
}

std::optional<ConversationRecord> ConversationStore::get(const std::string& owner,
                                                         const std::string& id) {
  std::lock_guard lock(mu_);
  return get_locked(owner, id);
}

ConversationPage ConversationStore::list(const std::string& owner, int limit,
                                         const std::string& cursor) {
  if (limit < 1 || limit > 200) fail(ErrorKind::kInvalidArgument, "limit must be 1 to 200");
  // The cursor is the last item's "updated_ms:seq": seq (insertion order) breaks ties
  // between conversations changed in the same millisecond.
  int64_t cur_ms = 0, cur_seq = 0;
  if (!cursor.empty()) {
    size_t colon = cursor.find(':');
    bool ok = colon != std::string::npos && colon > 0 && colon + 1 < cursor.size() && colon <= 18 &&
              cursor.size() - colon - 1 <= 18;
    for (size_t i = 0; ok && i < cursor.size(); ++i)
      ok = i == colon || (cursor[i] >= '0' && cursor[i] <= '9');
    if (!ok) fail(ErrorKind::kInvalidArgument, "malformed cursor '{}'", cursor);
    cur_ms = std::stoll(cursor.substr(0, colon));
    cur_seq = std::stoll(cursor.substr(colon + 1));
  }
  std::lock_guard lock(mu_);
  std::string q =
      std::string("SELECT ") + kConvColumns + ", c.seq FROM conversations c WHERE c.owner = ?";
  if (!cursor.empty()) q += " AND (c.updated_ms < ? OR (c.updated_ms = ? AND c.seq < ?))";
  q += " ORDER BY c.updated_ms DESC, c.seq DESC LIMIT ?";
  sql::Stmt s(*db_, q);
  s.bind(1, owner);
  int next = 2;
  if (!cursor.empty()) {
    s.bind(2, cur_ms).bind(3, cur_ms).bind(4, cur_seq);
    next = 5;
  }
  s.bind(next, int64_t(limit) + 1);
  ConversationPage page;
  std::vector<int64_t> seqs;
  while (s.step()) {
    page.items.push_back(read_conversation(s));
    seqs.push_back(s.int64(7));
  }
  if (int(page.items.size()) > limit) {
    page.items.resize(size_t(limit));
    page.next_cursor = std::to_string(page.items.back().updated_ms) + ":" +
                       std::to_string(seqs[size_t(limit) - 1]);
  }
  return page;
}

std::vector<SearchHit> ConversationStore::search(const std::string& owner, const std::string& query,
                                                 int limit) {
  if (limit < 1 || limit > 200) fail(ErrorKind::kInvalidArgument, "limit must be 1 to 200");
  std::vector<SearchHit> hits;
  const std::string match = fts_query(query);
  if (match.empty()) return hits;
  std::lock_guard lock(mu_);
  auto seen = [&](const std::string& id) {
    for (auto& h : hits)
      if (h.conversation.id == id) return true;
    return false;
  };
  {
    sql::Stmt s(*db_, std::string("SELECT ") + kConvColumns +
                          ", snippet(conversations_fts, 0, char(2), char(3), '…', 16) "
                          "FROM conversations_fts JOIN conversations c ON c.seq = "
                          "conversations_fts.rowid WHERE conversations_fts MATCH ? AND "
                          "c.owner = ? ORDER BY rank LIMIT ?");
    s.bind(1, match).bind(2, owner).bind(3, int64_t(limit));
    while (s.step()) hits.push_back({read_conversation(s), "", s.text(7)});
  }
  // Messages: the best match of each conversation, from the best matches overall.
  sql::Stmt s(*db_,
              "SELECT m.conversation_id, m.id, snippet(messages_fts, -1, char(2), char(3), "
              "'…', 16) FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid "
              "WHERE messages_fts MATCH ? AND m.conversation_id IN (SELECT id FROM "
              "conversations WHERE owner = ?) ORDER BY messages_fts.rank LIMIT 2000");
  s.bind(1, match).bind(2, owner);
  while (int(hits.size()) < limit && s.step()) {
    std::string cid = s.text(0);
    if (seen(cid)) continue;
    auto c = get_locked(owner, cid);
    if (c) hits.push_back({std::move(*c), s.text(1), s.text(2)});
  }
  if (int(hits.size()) > limit) hits.resize(size_t(limit));
  return hits;
}

void ConversationStore::touch_locked(const std::string& id, int64_t now) {
  sql::Stmt s(*db_, "UPDATE conversations SET updated_ms = max(updated_ms, ?) WHERE id = ?");
  s.bind(1, now).bind(2, id).run();
}

bool ConversationStore::rename(const std::string& owner, const std::string& id,
                               const std::string& title) {
  check_title(title);
  std::lock_guard lock(mu_);
  sql::Stmt s(*db_,
              "UPDATE conversations SET title = ?, updated_ms = ? WHERE id = ? AND owner = ?");
  s.bind(1, title).bind(2, now_ms()).bind(3, id).bind(4, owner).run();
  return db_->changes() > 0;
}

bool ConversationStore::set_settings(const std::string& owner, const std::string& id,
                                     const json& settings) {
  if (!settings.is_object()) fail(ErrorKind::kInvalidArgument, "settings must be an object");
  std::lock_guard lock(mu_);
  sql::Stmt s(*db_, "UPDATE conversations SET settings = ? WHERE id = ? AND owner = ?");
  s.bind(1, dump_json(settings)).bind(2, id).bind(3, owner).run();
  return db_->changes() > 0;
}

bool ConversationStore::set_leaf(const std::string& owner, const std::string& id,
                                 const std::string& leaf_id) {
  std::lock_guard lock(mu_);
  if (!get_locked(owner, id)) return false;
  sql::Stmt m(*db_, "SELECT 1 FROM messages WHERE id = ? AND conversation_id = ?");
  m.bind(1, leaf_id).bind(2, id);
  if (!m.step())
    fail(ErrorKind::kNotFound, "message '{}' is not in conversation '{}'", leaf_id, id);
  sql::Stmt s(*db_, "UPDATE conversations SET leaf_id = ? WHERE id = ?");
  s.bind(1, leaf_id).bind(2, id).run();
  return true;
}

bool ConversationStore::remove(const std::string& owner, const std::string& id) {
  std::lock_guard lock(mu_);
  sql::Stmt s(*db_, "DELETE FROM conversations WHERE id = ? AND owner = ?");
  s.bind(1, id).bind(2, owner).run();
  return db_->changes() > 0;
}

std::optional<std::vector<MessageRecord>> ConversationStore::messages(const std::string& owner,
                                                                      const std::string& id) {
  std::lock_guard lock(mu_);
  if (!get_locked(owner, id)) return std::nullopt;
  sql::Stmt s(*db_, std::string("SELECT ") + kMsgColumns +
                        " FROM messages WHERE conversation_id = ? ORDER BY seq");
  s.bind(1, id);
  std::vector<MessageRecord> out;
  while (s.step()) out.push_back(read_message(s));
  return out;
}

std::optional<MessageRecord> ConversationStore::message(const std::string& owner,
                                                        const std::string& id,
                                                        const std::string& message_id) {
  std::lock_guard lock(mu_);
  sql::Stmt s(*db_, std::string("SELECT ") + kMsgColumns +
                        " FROM messages WHERE id = ? AND conversation_id = ? AND "
                        "conversation_id IN (SELECT id FROM conversations WHERE owner = ?)");
  s.bind(1, message_id).bind(2, id).bind(3, owner);
  if (!s.step()) return std::nullopt;
  return read_message(s);
}

std::vector<MessageRecord> ConversationStore::path_to(const std::string& owner,
                                                      const std::string& id,
                                                      const std::string& message_id) {
  std::lock_guard lock(mu_);
  if (!get_locked(owner, id)) fail(ErrorKind::kNotFound, "no conversation '{}'", id);
  sql::Stmt s(*db_, std::string("WITH RECURSIVE up(id, depth) AS (SELECT ?, 0 UNION ALL ") +
                        "SELECT m.parent_id, up.depth + 1 FROM messages m JOIN up ON m.id = "
                        "up.id WHERE m.parent_id IS NOT NULL) SELECT " +
                        "m.id, coalesce(m.parent_id, ''), m.role, m.content, m.reasoning, "
                        "m.status, m.meta, m.created_ms, m.updated_ms FROM up JOIN messages m "
                        "ON m.id = up.id WHERE m.conversation_id = ? ORDER BY up.depth DESC");
  s.bind(1, message_id).bind(2, id);
  std::vector<MessageRecord> out;
  while (s.step()) out.push_back(read_message(s));
  if (out.empty() || out.back().id != message_id)
    fail(ErrorKind::kNotFound, "message '{}' is not in conversation '{}'", message_id, id);
  return out;
}

MessageRecord ConversationStore::add_message(const std::string& owner, const std::string& id,
                                             MessageRecord m) {
  if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool")
    fail(ErrorKind::kInvalidArgument, "unknown role '{}'", m.role);
  if (m.content.size() + m.reasoning.size() > kMaxMessageBytes)
    fail(ErrorKind::kInvalidArgument, "a message is at most {} bytes", kMaxMessageBytes);
  std::lock_guard lock(mu_);
  if (!get_locked(owner, id)) fail(ErrorKind::kNotFound, "no conversation '{}'", id);
  if (!m.parent_id.empty()) {
    sql::Stmt p(*db_, "SELECT 1 FROM messages WHERE id = ? AND conversation_id = ?");
    p.bind(1, m.parent_id).bind(2, id);
    if (!p.step())
      fail(ErrorKind::kNotFound, "message '{}' is not in conversation '{}'", m.parent_id, id);
  }
  m.id = new_store_id("m_");
  m.created_ms = m.updated_ms = now_ms();
  sql::Transaction tx(*db_);
  sql::Stmt s(*db_,
              "INSERT INTO messages(id, conversation_id, parent_id, role, content, reasoning, "
              "status, meta, created_ms, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, m.id).bind(2, id);
  if (m.parent_id.empty())
    s.bind_null(3);
  else
    s.bind(3, m.parent_id);
  s.bind(4, m.role).bind(5, m.content).bind(6, m.reasoning).bind(7, m.status);
  s.bind(8, dump_json(m.meta)).bind(9, m.created_ms).bind(10, m.updated_ms).run();
  sql::Stmt leaf(*db_, "UPDATE conversations SET leaf_id = ? WHERE id = ?");
  leaf.bind(1, m.id).bind(2, id).run();
  touch_locked(id, m.created_ms);
  tx.commit();
  return m;
}

bool ConversationStore::update_message(const std::string& message_id, const std::string& content,
                                       const std::string& reasoning, const std::string& status,
                                       const json& meta) {
  std::lock_guard lock(mu_);
  sql::Stmt s(*db_,
              "UPDATE messages SET content = ?, reasoning = ?, status = ?, meta = ?, "
              "updated_ms = ? WHERE id = ?");
  s.bind(1, content).bind(2, reasoning).bind(3, status).bind(4, dump_json(meta));
  s.bind(5, now_ms()).bind(6, message_id).run();
  return db_->changes() > 0;
}

bool ConversationStore::delete_message(const std::string& owner, const std::string& id,
                                       const std::string& message_id) {
  std::lock_guard lock(mu_);
  auto conv = get_locked(owner, id);
  if (!conv) return false;
  std::optional<std::string> parent;
  {
    sql::Stmt s(*db_, "SELECT parent_id FROM messages WHERE id = ? AND conversation_id = ?");
    s.bind(1, message_id).bind(2, id);
    if (!s.step()) return false;
    parent = s.text_or_null(0);
  }
  sql::Transaction tx(*db_);
  // Is the branch on show under the deleted message?
  bool leaf_inside = false;
  if (!conv->leaf_id.empty()) {
    sql::Stmt s(*db_,
                "WITH RECURSIVE up(id) AS (SELECT ? UNION ALL SELECT m.parent_id FROM "
                "messages m JOIN up ON m.id = up.id WHERE m.parent_id IS NOT NULL) "
                "SELECT 1 FROM up WHERE id = ?");
    s.bind(1, conv->leaf_id).bind(2, message_id);
    leaf_inside = s.step();
  }
  {
    sql::Stmt s(*db_, "DELETE FROM messages WHERE id = ?");
    s.bind(1, message_id).run();
  }
  if (leaf_inside) {
    // Show what remains nearest: from the parent (or the roots), the newest child each step.
    std::string leaf = parent.value_or("");
    for (;;) {
      sql::Stmt s(*db_, leaf.empty() ? "SELECT id FROM messages WHERE conversation_id = ? AND "
                                       "parent_id IS NULL ORDER BY seq DESC LIMIT 1"
                                     : "SELECT id FROM messages WHERE conversation_id = ? AND "
                                       "parent_id = ? ORDER BY seq DESC LIMIT 1");
      s.bind(1, id);
      if (!leaf.empty()) s.bind(2, leaf);
      if (!s.step()) break;
      leaf = s.text(0);
    }
    sql::Stmt u(*db_, "UPDATE conversations SET leaf_id = ? WHERE id = ?");
    if (leaf.empty())
      u.bind_null(1);
    else
      u.bind(1, leaf);
    u.bind(2, id).run();
  }
  touch_locked(id, now_ms());
  tx.commit();
  return true;
}

std::string ConversationStore::check_integrity() {
  std::lock_guard lock(mu_);
  std::string out;
  {
    sql::Stmt s(*db_, "PRAGMA integrity_check");
    while (s.step()) out += (out.empty() ? "" : "; ") + s.text(0);
  }
  if (out != "ok") return out;
  try {
    db_->exec("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)");
    db_->exec(
        "INSERT INTO conversations_fts(conversations_fts, rank) VALUES ('integrity-check', 1)");
  } catch (const Error& e) {
    return std::string("full-text index: ") + e.what();
  }
  sql::Stmt fk(*db_, "PRAGMA foreign_key_check");
  if (fk.step()) return "foreign key violation in table " + fk.text(0);
  return "ok";
}

}  // namespace tandem::store
