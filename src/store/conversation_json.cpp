// Export and import of one conversation as JSON (the page's "Export" and "Import").
#include <chrono>
#include <map>
#include <set>

#include "core/error.h"
#include "store/conversation_store.h"

namespace tandem::store {
namespace {

constexpr const char* kFormat = "tandem.conversation";
constexpr int kFormatVersion = 1;

std::string need_string(const json& j, const char* key, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) fail(ErrorKind::kInvalidArgument, "import: '{}' is missing", key);
    return "";
  }
  if (!it->is_string()) fail(ErrorKind::kInvalidArgument, "import: '{}' must be a string", key);
  return it->get<std::string>();
}

int64_t opt_ms(const json& j, const char* key, int64_t def) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_number_integer() || it->get<int64_t>() < 0)
    fail(ErrorKind::kInvalidArgument, "import: '{}' must be a non-negative integer", key);
  return it->get<int64_t>();
}

}  // namespace

std::optional<json> ConversationStore::export_json(const std::string& owner,
                                                   const std::string& id) {
  auto conv = get(owner, id);
  if (!conv) return std::nullopt;
  auto msgs = messages(owner, id);
  if (!msgs) return std::nullopt;
  json m = json::array();
  for (auto& r : *msgs)
    m.push_back({{"id", r.id},
                 {"parent_id", r.parent_id.empty() ? json(nullptr) : json(r.parent_id)},
                 {"role", r.role},
                 {"content", r.content},
                 {"reasoning", r.reasoning},
                 {"status", r.status},
                 {"meta", r.meta},
                 {"created_ms", r.created_ms}});
  return json{{"format", kFormat},
              {"version", kFormatVersion},
              {"conversation",
               {{"id", conv->id},
                {"title", conv->title},
                {"settings", conv->settings},
                {"leaf_id", conv->leaf_id.empty() ? json(nullptr) : json(conv->leaf_id)},
                {"created_ms", conv->created_ms},
                {"updated_ms", conv->updated_ms}}},
              {"messages", std::move(m)}};
}

std::string ConversationStore::import_json(const std::string& owner, const json& j) {
  // Validate the whole document before writing anything.
  if (!j.is_object()) fail(ErrorKind::kInvalidArgument, "import: expected a JSON object");
  if (need_string(j, "format", true) != kFormat)
    fail(ErrorKind::kInvalidArgument, "import: 'format' must be \"{}\"", kFormat);
  auto ver = j.find("version");
  if (ver == j.end() || !ver->is_number_integer() || ver->get<int64_t>() != kFormatVersion)
    fail(ErrorKind::kInvalidArgument, "import: 'version' must be {}", kFormatVersion);
  auto cit = j.find("conversation");
  if (cit == j.end() || !cit->is_object())
    fail(ErrorKind::kInvalidArgument, "import: 'conversation' must be an object");
  const json& c = *cit;
  std::string title = need_string(c, "title", false);
  if (title.size() > kMaxTitleBytes)
    fail(ErrorKind::kInvalidArgument, "import: the title is over {} bytes", kMaxTitleBytes);
  json settings = c.value("settings", json::object());
  if (!settings.is_object())
    fail(ErrorKind::kInvalidArgument, "import: 'settings' must be an object");
  std::string leaf = need_string(c, "leaf_id", false);
  auto mit = j.find("messages");
  if (mit == j.end() || !mit->is_array())
    fail(ErrorKind::kInvalidArgument, "import: 'messages' must be an array");
  if (mit->size() > kMaxImportMessages)
    fail(ErrorKind::kInvalidArgument, "import: at most {} messages", kMaxImportMessages);

  struct In {
    std::string old_id, old_parent;
    MessageRecord rec;
  };
  std::vector<In> in;
  std::set<std::string> ids;
  for (size_t i = 0; i < mit->size(); ++i) {
    const json& m = (*mit)[i];
    if (!m.is_object())
      fail(ErrorKind::kInvalidArgument, "import: messages[{}] must be an object", i);
    In x;
    x.old_id = need_string(m, "id", true);
    x.old_parent = need_string(m, "parent_id", false);
    // Parents come before their children: this also rules out cycles.
    if (!x.old_parent.empty() && !ids.count(x.old_parent))
      fail(ErrorKind::kInvalidArgument,
           "import: messages[{}] has parent '{}', which is not an earlier message", i,
           x.old_parent);
    if (!ids.insert(x.old_id).second)
      fail(ErrorKind::kInvalidArgument, "import: message id '{}' appears twice", x.old_id);
    x.rec.role = need_string(m, "role", true);
    if (x.rec.role != "system" && x.rec.role != "user" && x.rec.role != "assistant" &&
        x.rec.role != "tool")
      fail(ErrorKind::kInvalidArgument, "import: messages[{}] has unknown role '{}'", i,
           x.rec.role);
    x.rec.content = need_string(m, "content", false);
    x.rec.reasoning = need_string(m, "reasoning", false);
    if (x.rec.content.size() + x.rec.reasoning.size() > kMaxMessageBytes)
      fail(ErrorKind::kInvalidArgument, "import: messages[{}] is over {} bytes", i,
           kMaxMessageBytes);
    std::string status = need_string(m, "status", false);
    static const std::set<std::string> kStates = {"done", "stopped", "error", "interrupted"};
    // An answer that was still running when exported is stored as interrupted.
    x.rec.status = status.empty() ? "done" : kStates.count(status) ? status : "interrupted";
    x.rec.meta = m.value("meta", json::object());
    if (!x.rec.meta.is_object())
      fail(ErrorKind::kInvalidArgument, "import: messages[{}].meta must be an object", i);
    x.rec.created_ms = opt_ms(m, "created_ms", 0);
    in.push_back(std::move(x));
  }
  if (!leaf.empty() && !ids.count(leaf))
    fail(ErrorKind::kInvalidArgument, "import: leaf_id '{}' is not one of the messages", leaf);

  std::lock_guard lock(mu_);
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  sql::Transaction tx(*db_);
  const std::string cid = new_store_id("c_");
  std::map<std::string, std::string> new_id;
  for (auto& x : in) new_id[x.old_id] = new_store_id("m_");
  std::string new_leaf = leaf.empty() ? (in.empty() ? "" : new_id[in.back().old_id]) : new_id[leaf];
  {
    sql::Stmt s(*db_,
                "INSERT INTO conversations(id, owner, title, settings, leaf_id, created_ms, "
                "updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?)");
    s.bind(1, cid).bind(2, owner).bind(3, title);
    s.bind(4, settings.dump(-1, ' ', false, json::error_handler_t::replace));
    if (new_leaf.empty())
      s.bind_null(5);
    else
      s.bind(5, new_leaf);
    s.bind(6, opt_ms(c, "created_ms", now)).bind(7, now).run();
  }
  sql::Stmt s(*db_,
              "INSERT INTO messages(id, conversation_id, parent_id, role, content, reasoning, "
              "status, meta, created_ms, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (auto& x : in) {
    s.reset();
    s.bind(1, new_id[x.old_id]).bind(2, cid);
    if (x.old_parent.empty())
      s.bind_null(3);
    else
      s.bind(3, new_id[x.old_parent]);
    s.bind(4, x.rec.role).bind(5, x.rec.content).bind(6, x.rec.reasoning).bind(7, x.rec.status);
    s.bind(8, x.rec.meta.dump(-1, ' ', false, json::error_handler_t::replace));
    const int64_t t = x.rec.created_ms ? x.rec.created_ms : now;
    s.bind(9, t).bind(10, t).run();
  }
  tx.commit();
  return cid;
}

}  // namespace tandem::store
