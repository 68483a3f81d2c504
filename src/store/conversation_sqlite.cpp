#include "store/conversation_sqlite.h"

#include <sqlite3.h>

#include "core/error.h"

namespace tandem::store::sql {

Db::Db(const std::filesystem::path& file) : file_(file.string()) {
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(file_.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    fail(ErrorKind::kIo, "cannot open the conversation store {}: {}", file_, msg);
  }
  sqlite3_extended_result_codes(db_, 1);
  // Writers from other processes (a second server on the same folder) wait, not fail.
  sqlite3_busy_timeout(db_, 5000);
}

Db::~Db() {
  sqlite3_close_v2(db_);
}

int Db::changes() const {
  return sqlite3_changes(db_);
}

void Db::fail_here(std::string_view what) const {
  int code = sqlite3_extended_errcode(db_);
  ErrorKind kind = ErrorKind::kIo;
  if ((code & 0xff) == SQLITE_CONSTRAINT) kind = ErrorKind::kInvalidArgument;
  if ((code & 0xff) == SQLITE_FULL) kind = ErrorKind::kResource;
  if ((code & 0xff) == SQLITE_CORRUPT || (code & 0xff) == SQLITE_NOTADB)
    fail(ErrorKind::kIo, "the conversation store {} is damaged or not a database ({}): {}", file_,
         sqlite3_errmsg(db_), what);
  fail(kind, "conversation store {}: {} ({})", file_, sqlite3_errmsg(db_), what);
}

void Db::exec(std::string_view sql) {
  std::string s(sql);
  char* err = nullptr;
  if (sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "error";
    sqlite3_free(err);
    fail_here(s.substr(0, 80) + ": " + msg);
  }
}

Stmt::Stmt(Db& db, std::string_view sql) : db_(db), sql_(sql) {
  if (sqlite3_prepare_v3(db_.handle(), sql_.data(), int(sql_.size()), 0, &st_, nullptr) !=
      SQLITE_OK)
    db_.fail_here("prepare: " + sql_.substr(0, 80));
}

Stmt::~Stmt() {
  sqlite3_finalize(st_);
}

Stmt& Stmt::bind(int i, std::string_view v) {
  if (sqlite3_bind_text(st_, i, v.data(), int(v.size()), SQLITE_TRANSIENT) != SQLITE_OK)
    db_.fail_here("bind");
  return *this;
}

Stmt& Stmt::bind(int i, int64_t v) {
  if (sqlite3_bind_int64(st_, i, v) != SQLITE_OK) db_.fail_here("bind");
  return *this;
}

Stmt& Stmt::bind_null(int i) {
  if (sqlite3_bind_null(st_, i) != SQLITE_OK) db_.fail_here("bind");
  return *this;
}

bool Stmt::step() {
  int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_.fail_here(sql_.substr(0, 80));
}

void Stmt::run() {
  while (step()) {
  }
}

void Stmt::reset() {
  sqlite3_reset(st_);
  sqlite3_clear_bindings(st_);
}

std::string Stmt::text(int col) const {
  const unsigned char* p = sqlite3_column_text(st_, col);
  int n = sqlite3_column_bytes(st_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), size_t(n)) : std::string();
}

std::optional<std::string> Stmt::text_or_null(int col) const {
  if (sqlite3_column_type(st_, col) == SQLITE_NULL) return std::nullopt;
  return text(col);
}

int64_t Stmt::int64(int col) const {
  return sqlite3_column_int64(st_, col);
}

Transaction::Transaction(Db& db) : db_(db) {
  db_.exec("BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  if (!done_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace tandem::store::sql
