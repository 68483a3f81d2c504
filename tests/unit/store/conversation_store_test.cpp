// The conversation store: conversations and message trees, owners kept apart, paging,
// full-text search, export/import round trips and the validation of bad imports.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <set>

#include "core/error.h"
#include "store/conversation_store.h"

namespace tandem::store {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("tandem_conv_" + std::to_string(::getpid()) + "_" + new_store_id(""));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

MessageRecord msg(std::string role, std::string content, std::string parent = {}) {
  MessageRecord m;
  m.role = std::move(role);
  m.content = std::move(content);
  m.parent_id = std::move(parent);
  return m;
}

TEST(ConversationStore, CreatesStoresAndReadsBackAfterReopen) {
  TempDir d;
  std::string cid, a_id;
  {
    ConversationStore s(d.path / "sub" / "conversations.db");
    EXPECT_EQ(s.schema_version(), kConversationSchemaVersion);
    auto c = s.create("", "First chat", json{{"temperature", 0.7}});
    cid = c.id;
    auto u = s.add_message("", cid, msg("user", "hello there"));
    auto a = s.add_message("", cid, msg("assistant", "general kenobi", u.id));
    a_id = a.id;
    EXPECT_TRUE(
        s.update_message(a.id, "general kenobi!", "thinking...", "done", json{{"ttft_ms", 12}}));
  }
  ConversationStore s(d.path / "sub" / "conversations.db");
  auto c = s.get("", cid);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->title, "First chat");
  EXPECT_EQ(c->settings["temperature"], 0.7);
  EXPECT_EQ(c->leaf_id, a_id);
  EXPECT_EQ(c->message_count, 2);
  auto msgs = s.messages("", cid);
  ASSERT_TRUE(msgs);
  ASSERT_EQ(msgs->size(), 2u);
  EXPECT_EQ((*msgs)[1].content, "general kenobi!");
  EXPECT_EQ((*msgs)[1].reasoning, "thinking...");
  EXPECT_EQ((*msgs)[1].meta["ttft_ms"], 12);
  EXPECT_EQ((*msgs)[1].parent_id, (*msgs)[0].id);
  EXPECT_EQ(s.check_integrity(), "ok");
}

TEST(ConversationStore, StreamingAnswersBecomeInterruptedOnReopen) {
  TempDir d;
  std::string cid, aid;
  {
    ConversationStore s(d.path / "c.db");
    cid = s.create("", "t").id;
    auto u = s.add_message("", cid, msg("user", "q"));
    auto a = msg("assistant", "half an ans", u.id);
    a.status = "streaming";
    aid = s.add_message("", cid, a).id;
  }
  ConversationStore s(d.path / "c.db");
  EXPECT_EQ(s.message("", cid, aid)->status, "interrupted");
  EXPECT_EQ(s.message("", cid, aid)->content, "half an ans");
}

TEST(ConversationStore, OwnersNeverSeeEachOther) {
  TempDir d;
  ConversationStore s(d.path / "c.db");
  auto a = s.create("alice", "alpha secret plans");
  s.add_message("alice", a.id, msg("user", "the zebra password"));
  auto b = s.create("bob", "bravo");
  EXPECT_FALSE(s.get("bob", a.id));
  EXPECT_FALSE(s.messages("bob", a.id));
  EXPECT_FALSE(s.message("bob", a.id, s.get("alice", a.id)->leaf_id));
  EXPECT_FALSE(s.rename("bob", a.id, "mine now"));
  EXPECT_FALSE(s.remove("bob", a.id));
  EXPECT_FALSE(s.delete_message("bob", a.id, s.get("alice", a.id)->leaf_id));
  EXPECT_FALSE(s.export_json("bob", a.id));
  EXPECT_FALSE(s.set_settings("bob", a.id, json::object()));
  EXPECT_FALSE(s.set_leaf("bob", a.id, "m_x"));
  EXPECT_THROW(s.add_message("bob", a.id, msg("user", "x")), Error);
  EXPECT_TRUE(s.search("bob", "zebra", 10).empty());
  EXPECT_TRUE(s.search("bob", "secret", 10).empty());
  EXPECT_EQ(s.search("alice", "zebra", 10).size(), 1u);
  auto page = s.list("bob", 50);
  ASSERT_EQ(page.items.size(), 1u);
  EXPECT_EQ(page.items[0].id, b.id);
  EXPECT_EQ(s.get("alice", a.id)->title, "alpha secret plans");
}

TEST(ConversationStore, PagesCoverEveryConversationOnceNewestFirst) {
  TempDir d;
  ConversationStore s(d.path / "c.db");
  std::set<std::string> made;
  for (int i = 0; i < 23; ++i) made.insert(s.create("", "chat " + std::to_string(i)).id);
  std::set<std::string> seen;
  std::string cursor;
  int pages = 0;
  int64_t last_ms = INT64_MAX;
  do {
    auto p = s.list("", 5, cursor);
    ++pages;
    for (auto& c : p.items) {
      EXPECT_TRUE(seen.insert(c.id).second) << "seen twice: " << c.id;
      EXPECT_LE(c.updated_ms, last_ms);
      last_ms = c.updated_ms;
    }
    cursor = p.next_cursor;
  } while (!cursor.empty());
  EXPECT_EQ(seen, made);
  EXPECT_EQ(pages, 5);
  EXPECT_THROW(s.list("", 5, "garbage"), Error);
  EXPECT_THROW(s.list("", 5, ":x"), Error);
  EXPECT_THROW(s.list("", 5, "1:x"), Error);
  EXPECT_THROW(s.list("", 0), Error);
  EXPECT_THROW(s.list("", 201), Error);
}

TEST(ConversationStore, BranchesKeepEarlierAnswersAndDeleteMovesTheLeaf) {
  TempDir d;
  ConversationStore s(d.path / "c.db");
  auto cid = s.create("", "t").id;
  auto u = s.add_message("", cid, msg("user", "q"));
  auto a1 = s.add_message("", cid, msg("assistant", "first answer", u.id));
  auto a2 = s.add_message("", cid, msg("assistant", "second answer", u.id));  // regenerate
  EXPECT_EQ(s.get("", cid)->leaf_id, a2.id);
  auto path = s.path_to("", cid, a1.id);
  ASSERT_EQ(path.size(), 2u);
  EXPECT_EQ(path[0].id, u.id);
  EXPECT_EQ(path[1].id, a1.id);
  EXPECT_TRUE(s.set_leaf("", cid, a1.id));
  EXPECT_EQ(s.get("", cid)->leaf_id, a1.id);
  EXPECT_THROW(s.set_leaf("", cid, "m_nope"), Error);
  // An edit of the user message: a sibling root with its own answer.
  auto u2 = s.add_message("", cid, msg("user", "q edited"));
  auto a3 = s.add_message("", cid, msg("assistant", "third", u2.id));
  EXPECT_EQ(s.messages("", cid)->size(), 5u);
  // Deleting the branch on show moves to the newest remaining branch.
  EXPECT_TRUE(s.delete_message("", cid, u2.id));
  EXPECT_EQ(s.messages("", cid)->size(), 3u);
  EXPECT_EQ(s.get("", cid)->leaf_id, a2.id);
  EXPECT_FALSE(s.message("", cid, a3.id));
  EXPECT_TRUE(s.search("", "third", 5).empty());  // the index follows cascaded deletes
  EXPECT_TRUE(s.delete_message("", cid, u.id));
  EXPECT_EQ(s.get("", cid)->leaf_id, "");
  EXPECT_EQ(s.get("", cid)->message_count, 0);
  EXPECT_THROW(s.add_message("", cid, msg("user", "x", "m_missing")), Error);
  EXPECT_THROW(s.add_message("", cid, msg("robot", "x")), Error);
  EXPECT_THROW(s.path_to("", cid, "m_missing"), Error);
  EXPECT_EQ(s.check_integrity(), "ok");
}

TEST(ConversationStore, SearchFindsWordsPrefixesTitlesAndReasoning) {
  TempDir d;
  ConversationStore s(d.path / "c.db");
  auto c1 = s.create("", "Rust lifetimes");
  auto u = s.add_message("", c1.id, msg("user", "Explain borrow checking in detail"));
  auto c2 = s.create("", "Cooking");
  auto m = msg("assistant", "Boil the pasta for nine minutes.");
  m.reasoning = "The user wants al dente spaghetti";
  s.add_message("", c2.id, m);
  auto c3 = s.create("", "Café notes");
  s.add_message("", c3.id, msg("user", "naïve résumé"));

  auto hits = s.search("", "borrow", 10);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].conversation.id, c1.id);
  EXPECT_EQ(hits[0].message_id, u.id);
  EXPECT_NE(hits[0].snippet.find("\x02"
                                 "borrow\x03"),
            std::string::npos)
      << hits[0].snippet;
  EXPECT_EQ(s.search("", "borr", 10).size(), 1u);        // prefix
  EXPECT_EQ(s.search("", "lifetimes", 10).size(), 1u);   // title
  EXPECT_EQ(s.search("", "spaghetti", 10).size(), 1u);   // reasoning
  EXPECT_EQ(s.search("", "pasta nine", 10).size(), 1u);  // every word
  EXPECT_TRUE(s.search("", "pasta borrow", 10).empty());
  EXPECT_EQ(s.search("", "cafe", 10).size(), 1u);    // diacritics folded
  EXPECT_EQ(s.search("", "RESUME", 10).size(), 1u);  // case folded
  // FTS syntax in user text is only text: no error, no injection.
  for (const char* q : {"\"", "a OR b", "NEAR(", "*", "col:thing", "'; DROP TABLE messages; --",
                        "(((", "\"unterminated", "-", "^start"})
    EXPECT_NO_THROW(s.search("", q, 10)) << q;
  EXPECT_TRUE(s.search("", "   ", 10).empty());
  // Renamed titles and edited text are what is found.
  EXPECT_TRUE(s.rename("", c2.id, "Italian dinner"));
  EXPECT_EQ(s.search("", "italian", 10).size(), 1u);
  EXPECT_TRUE(s.search("", "cooking", 10).empty());
  EXPECT_EQ(s.check_integrity(), "ok");
}

TEST(ConversationStore, ExportImportRoundTripKeepsTheTree) {
  TempDir d;
  ConversationStore s(d.path / "c.db");
  auto cid = s.create("", "Tree", json{{"model", "tiny"}}).id;
  auto u = s.add_message("", cid, msg("user", "q"));
  auto a1 = s.add_message("", cid, msg("assistant", "a1", u.id));
  auto m = msg("assistant", "a2 with \"quotes\" and ünïcode", u.id);
  m.reasoning = "hmm";
  m.meta = {{"output_tokens", 7}};
  s.add_message("", cid, m);
  s.set_leaf("", cid, a1.id);
  json e = *s.export_json("", cid);
  std::string nid = s.import_json("bob", e);
  EXPECT_NE(nid, cid);
  json e2 = *s.export_json("bob", nid);
  // Same tree under new ids: compare with ids mapped.
  ASSERT_EQ(e2["messages"].size(), 3u);
  std::map<std::string, std::string> map;
  for (size_t i = 0; i < 3; ++i) {
    auto& x = e["messages"][i];
    auto& y = e2["messages"][i];
    map[x["id"]] = y["id"];
    EXPECT_EQ(x["role"], y["role"]);
    EXPECT_EQ(x["content"], y["content"]);
    EXPECT_EQ(x["reasoning"], y["reasoning"]);
    EXPECT_EQ(x["meta"], y["meta"]);
    EXPECT_EQ(x["created_ms"], y["created_ms"]);
    if (x["parent_id"].is_null())
      EXPECT_TRUE(y["parent_id"].is_null());
    else
      EXPECT_EQ(map[x["parent_id"]], y["parent_id"]);
  }
  EXPECT_EQ(map[e["conversation"]["leaf_id"]], e2["conversation"]["leaf_id"]);
  EXPECT_EQ(e2["conversation"]["title"], "Tree");
  EXPECT_EQ(e2["conversation"]["settings"]["model"], "tiny");
  EXPECT_FALSE(s.get("", nid));  // imported for bob only
}

TEST(ConversationStore, BadImportsStoreNothing) {
  TempDir d;
  ConversationStore s(d.path / "c.db");
  auto good = [] {
    return json{
        {"format", "tandem.conversation"},
        {"version", 1},
        {"conversation", {{"title", "x"}}},
        {"messages", json::array({{{"id", "a"}, {"role", "user"}, {"content", "hi"}},
                                  {{"id", "b"}, {"parent_id", "a"}, {"role", "assistant"}}})}};
  };
  EXPECT_NO_THROW(s.import_json("", good()));
  std::vector<json> bad;
  bad.push_back(json::array());
  {
    auto j = good();
    j["format"] = "other";
    bad.push_back(j);
  }
  {
    auto j = good();
    j["version"] = 2;
    bad.push_back(j);
  }
  {
    auto j = good();
    j["messages"][1]["parent_id"] = "zz";  // unknown parent
    bad.push_back(j);
  }
  {
    auto j = good();
    j["messages"][0]["parent_id"] = "b";  // parent after child (a cycle a -> b -> a)
    bad.push_back(j);
  }
  {
    auto j = good();
    j["messages"][1]["id"] = "a";  // duplicate
    bad.push_back(j);
  }
  {
    auto j = good();
    j["messages"][0]["role"] = "root";
    bad.push_back(j);
  }
  {
    auto j = good();
    j["messages"][0]["content"] = 5;
    bad.push_back(j);
  }
  {
    auto j = good();
    j["conversation"]["leaf_id"] = "q";
    bad.push_back(j);
  }
  {
    auto j = good();
    j["conversation"]["title"] = std::string(kMaxTitleBytes + 1, 'x');
    bad.push_back(j);
  }
  {
    auto j = good();
    j["messages"] = json::object();
    bad.push_back(j);
  }
  {
    auto j = good();
    j["messages"][0]["meta"] = "str";
    bad.push_back(j);
  }
  for (auto& j : bad) {
    try {
      s.import_json("", j);
      ADD_FAILURE() << "accepted: " << j.dump();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    }
  }
  EXPECT_EQ(s.list("", 100).items.size(), 1u);  // only the good one
  EXPECT_EQ(s.check_integrity(), "ok");
}

TEST(ConversationStore, LimitsOnTitlesAndMessages) {
  TempDir d;
  ConversationStore s(d.path / "c.db");
  EXPECT_THROW(s.create("", std::string(kMaxTitleBytes + 1, 'x')), Error);
  auto cid = s.create("", "ok").id;
  EXPECT_THROW(s.rename("", cid, std::string(kMaxTitleBytes + 1, 'x')), Error);
  EXPECT_THROW(s.add_message("", cid, msg("user", std::string(kMaxMessageBytes + 1, 'x'))), Error);
  EXPECT_EQ(s.get("", cid)->message_count, 0);
}

}  // namespace
}  // namespace tandem::store
