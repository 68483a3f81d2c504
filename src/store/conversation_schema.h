#pragma once
// The conversation store's schema, as an ordered list of migrations. The database's
// `PRAGMA user_version` says how many have run; opening a store runs the missing ones, each
// in its own transaction (a crash mid-migration leaves the previous version intact). A
// database from a newer tandem (a higher version than this build knows) is refused, never
// rewritten.
#include "store/conversation_sqlite.h"

namespace tandem::store {

inline constexpr int kConversationSchemaVersion = 3;

// The version the file is at now (0: empty).
int conversation_schema_version(sql::Db& db);
// Runs the migrations up to `target` (tests stop early to build old databases). Throws
// Error(kUnsupported) for a file newer than this build, Error(kIo) for a foreign database.
void migrate_conversations(sql::Db& db, int target = kConversationSchemaVersion);

}  // namespace tandem::store
