// The conversation store's schema over time, and its safety: migrations from older files,
// refusal of newer or foreign files, a failed migration that leaves the old version intact,
// and a writer killed with SIGKILL in the middle of its writes.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "core/error.h"
#include "store/conversation_store.h"

namespace tandem::store {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("tandem_schema_" + std::to_string(::getpid()) + "_" + new_store_id(""));
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

// A database as the first schema version wrote it, with rows in it.
void write_v1(const fs::path& file) {
  sql::Db db(file);
  migrate_conversations(db, 1);
  db.exec(
      "INSERT INTO conversations(id, owner, title, settings, leaf_id, created_ms, updated_ms) "
      "VALUES ('c_old', '', 'Quantum notes', '{}', 'm_2', 1000, 2000);"
      "INSERT INTO messages(id, conversation_id, parent_id, role, content, created_ms, "
      "updated_ms) VALUES ('m_1', 'c_old', NULL, 'user', 'what is entanglement', 1000, 1000);"
      "INSERT INTO messages(id, conversation_id, parent_id, role, content, reasoning, "
      "created_ms, updated_ms) VALUES ('m_2', 'c_old', 'm_1', 'assistant', 'a correlation', "
      "'think of bell pairs', 2000, 2000);");
  EXPECT_EQ(conversation_schema_version(db), 1);
}

TEST(ConversationSchema, OldFilesAreMigratedAndTheirRowsIndexed) {
  TempDir d;
  write_v1(d.path / "c.db");
  ConversationStore s(d.path / "c.db");
  EXPECT_EQ(s.schema_version(), kConversationSchemaVersion);
  auto c = s.get("", "c_old");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->message_count, 2);
  EXPECT_EQ(c->leaf_id, "m_2");
  // Rows written before the indexes existed are found (content, reasoning, title).
  EXPECT_EQ(s.search("", "entanglement", 5).size(), 1u);
  EXPECT_EQ(s.search("", "bell", 5).size(), 1u);
  EXPECT_EQ(s.search("", "quantum", 5).size(), 1u);
  // And the migrated file works like a new one.
  s.add_message("", "c_old", msg("user", "more on decoherence", "m_2"));
  EXPECT_EQ(s.search("", "decoherence", 5).size(), 1u);
  EXPECT_EQ(s.check_integrity(), "ok");
}

TEST(ConversationSchema, EveryIntermediateVersionMigrates) {
  for (int v = 0; v <= kConversationSchemaVersion; ++v) {
    TempDir d;
    {
      sql::Db db(d.path / "c.db");
      migrate_conversations(db, v);
      EXPECT_EQ(conversation_schema_version(db), v);
    }
    ConversationStore s(d.path / "c.db");
    EXPECT_EQ(s.schema_version(), kConversationSchemaVersion) << "from " << v;
    auto c = s.create("", "t");
    s.add_message("", c.id, msg("user", "hello migrated world"));
    EXPECT_EQ(s.search("", "migrated", 5).size(), 1u) << "from " << v;
  }
}

TEST(ConversationSchema, NewerFilesAreRefusedAndLeftAlone) {
  TempDir d;
  {
    sql::Db db(d.path / "c.db");
    migrate_conversations(db);
    db.exec("PRAGMA user_version = 99");
  }
  try {
    ConversationStore s(d.path / "c.db");
    FAIL() << "opened a newer store";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("99"), std::string::npos);
  }
  sql::Db db(d.path / "c.db");
  EXPECT_EQ(conversation_schema_version(db), 99);
}

TEST(ConversationSchema, ForeignDatabasesAndGarbageAreRefused) {
  TempDir d;
  {
    sql::Db db(d.path / "other.db");
    db.exec("CREATE TABLE accounts(id INTEGER)");
  }
  EXPECT_THROW(ConversationStore(d.path / "other.db"), Error);
  {
    sql::Db db(d.path / "other.db");  // untouched
    sql::Stmt s(db, "SELECT count(*) FROM sqlite_schema");
    ASSERT_TRUE(s.step());
    EXPECT_EQ(s.int64(0), 1);
  }
  {
    std::ofstream f(d.path / "garbage.db", std::ios::binary);
    std::mt19937 rng(7);
    for (int i = 0; i < 8192; ++i) f.put(char(rng()));
  }
  try {
    ConversationStore s(d.path / "garbage.db");
    FAIL() << "opened garbage";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo) << e.what();
  }
  fs::create_directories(d.path / "dir.db");
  EXPECT_THROW(ConversationStore(d.path / "dir.db"), Error);
}

TEST(ConversationSchema, AFailedMigrationLeavesThePreviousVersion) {
  TempDir d;
  write_v1(d.path / "c.db");
  {
    // Something in the way of migration 2: it must fail whole, not half.
    sql::Db db(d.path / "c.db");
    db.exec("CREATE TABLE messages_fts(x)");
  }
  EXPECT_THROW(ConversationStore(d.path / "c.db"), Error);
  sql::Db db(d.path / "c.db");
  EXPECT_EQ(conversation_schema_version(db), 1);
  sql::Stmt t(db, "SELECT count(*) FROM sqlite_schema WHERE name LIKE 'messages_fts_%'");
  ASSERT_TRUE(t.step());
  EXPECT_EQ(t.int64(0), 0);  // no trigger of migration 2 was left behind
  sql::Stmt m(db, "SELECT count(*) FROM messages");
  ASSERT_TRUE(m.step());
  EXPECT_EQ(m.int64(0), 2);
}

// The child writes conversations in a loop and reports each commit on a pipe; the parent
// kills it with SIGKILL at a random point, then opens the store and checks it.
TEST(ConversationSchema, SigkillDuringWritesNeverCorrupts) {
  TempDir d;
  const fs::path file = d.path / "c.db";
  std::mt19937 rng(12345);
  std::map<std::string, int> acked;  // conversation -> messages committed
  for (int round = 0; round < 4; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      try {
        ConversationStore s(file);
        std::string big(3000, 'x');
        for (int i = 0;; ++i) {
          auto c = s.create("", "round " + std::to_string(i));
          std::string parent;
          for (int k = 0; k < 3; ++k) {
            MessageRecord m = msg(k % 2 ? "assistant" : "user",
                                  "message " + std::to_string(k) + " " + big, parent);
            m.status = "streaming";
            parent = s.add_message("", c.id, m).id;
            s.update_message(parent, "final " + std::to_string(k) + big, "r", "done", {});
            std::string line = c.id + " " + std::to_string(k + 1) + "\n";
            if (write(fds[1], line.data(), line.size()) < 0) _exit(3);
          }
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer: %s\n", e.what());
        _exit(2);
      }
      _exit(0);
    }
    close(fds[1]);
    const int kill_after = 20 + int(rng() % 200);
    FILE* in = fdopen(fds[0], "r");
    char buf[256];
    int lines = 0;
    while (lines < kill_after && fgets(buf, sizeof buf, in)) {
      std::string l(buf);
      auto sp = l.find(' ');
      acked[l.substr(0, sp)] = std::stoi(l.substr(sp + 1));
      ++lines;
    }
    kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    fclose(in);
    ASSERT_TRUE(WIFSIGNALED(st)) << "the writer ended by itself (status " << st << ")";
    ASSERT_EQ(lines, kill_after);

    ConversationStore s(file);
    ASSERT_EQ(s.check_integrity(), "ok") << "round " << round;
    for (auto& [cid, n] : acked) {
      auto msgs = s.messages("", cid);
      ASSERT_TRUE(msgs) << cid;
      ASSERT_GE(int(msgs->size()), n) << cid;
      for (auto& m : *msgs)
        EXPECT_TRUE(m.status == "done" || m.status == "interrupted") << m.status;
    }
    EXPECT_FALSE(s.search("", "final", 5).empty());
  }
}

}  // namespace
}  // namespace tandem::store
