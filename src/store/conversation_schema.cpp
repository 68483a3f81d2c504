#include "store/conversation_schema.h"

#include <string>

#include "core/error.h"

namespace tandem::store {
namespace {

// Migration N takes the schema from version N-1 to N. Never edit one that has shipped: add
// the next.
const char* const kMigrations[] = {
    // Tables with an FTS index have an INTEGER PRIMARY KEY (seq): VACUUM keeps those rowids.
    // 1: conversations (owned by an API key's name; "" without keys) and their messages, a
    // tree: edits and regenerations add siblings, and leaf_id says which branch is shown.
    R"sql(
CREATE TABLE conversations(
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  owner TEXT NOT NULL,
  title TEXT NOT NULL DEFAULT '',
  settings TEXT NOT NULL DEFAULT '{}',
  leaf_id TEXT,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL
);
CREATE INDEX conversations_by_owner ON conversations(owner, updated_ms DESC, id DESC);
CREATE TABLE messages(
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  parent_id TEXT REFERENCES messages(id) ON DELETE CASCADE,
  role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
  content TEXT NOT NULL DEFAULT '',
  reasoning TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL DEFAULT 'done',
  meta TEXT NOT NULL DEFAULT '{}',
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL
);
CREATE INDEX messages_by_conversation ON messages(conversation_id, seq);
CREATE INDEX messages_by_parent ON messages(parent_id);
)sql",
    // 2: full-text search over message text and reasoning (FTS5, external content kept in
    // step by triggers; rows already stored are indexed by the rebuild).
    R"sql(
CREATE VIRTUAL TABLE messages_fts USING fts5(
  content, reasoning, content='messages', content_rowid='seq',
  tokenize='unicode61 remove_diacritics 2');
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
  INSERT INTO messages_fts(rowid, content, reasoning)
  VALUES (new.seq, new.content, new.reasoning);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
  INSERT INTO messages_fts(messages_fts, rowid, content, reasoning)
  VALUES ('delete', old.seq, old.content, old.reasoning);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, reasoning ON messages BEGIN
  INSERT INTO messages_fts(messages_fts, rowid, content, reasoning)
  VALUES ('delete', old.seq, old.content, old.reasoning);
  INSERT INTO messages_fts(rowid, content, reasoning)
  VALUES (new.seq, new.content, new.reasoning);
END;
INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');
)sql",
    // 3: titles are searched too.
    R"sql(
CREATE VIRTUAL TABLE conversations_fts USING fts5(
  title, content='conversations', content_rowid='seq',
  tokenize='unicode61 remove_diacritics 2');
CREATE TRIGGER conversations_fts_insert AFTER INSERT ON conversations BEGIN
  INSERT INTO conversations_fts(rowid, title) VALUES (new.seq, new.title);
END;
CREATE TRIGGER conversations_fts_delete AFTER DELETE ON conversations BEGIN
  INSERT INTO conversations_fts(conversations_fts, rowid, title)
  VALUES ('delete', old.seq, old.title);
END;
CREATE TRIGGER conversations_fts_update AFTER UPDATE OF title ON conversations BEGIN
  INSERT INTO conversations_fts(conversations_fts, rowid, title)
  VALUES ('delete', old.seq, old.title);
  INSERT INTO conversations_fts(rowid, title) VALUES (new.seq, new.title);
END;
INSERT INTO conversations_fts(conversations_fts) VALUES ('rebuild');
)sql",
};
static_assert(std::size(kMigrations) == kConversationSchemaVersion);

}  // namespace

int conversation_schema_version(sql::Db& db) {
  sql::Stmt s(db, "PRAGMA user_version");
  return s.step() ? int(s.int64(0)) : 0;
}

void migrate_conversations(sql::Db& db, int target) {
  TANDEM_CHECK(target >= 0 && target <= kConversationSchemaVersion);
  int have = conversation_schema_version(db);
  if (have > kConversationSchemaVersion)
    fail(ErrorKind::kUnsupported,
         "the conversation store {} has schema version {}, newer than this tandem knows ({}); "
         "use a newer tandem or another --data-dir",
         db.file(), have, kConversationSchemaVersion);
  if (have == 0) {
    // A file that already holds other tables is someone else's database: leave it alone.
    sql::Stmt s(db, "SELECT count(*) FROM sqlite_schema");
    if (s.step() && s.int64(0) > 0)
      fail(ErrorKind::kIo, "{} is a database, but not a tandem conversation store", db.file());
  }
  for (int v = have; v < target; ++v) {
    sql::Transaction tx(db);
    db.exec(kMigrations[v]);
    db.exec("PRAGMA user_version = " + std::to_string(v + 1));
    tx.commit();
  }
}

}  // namespace tandem::store
