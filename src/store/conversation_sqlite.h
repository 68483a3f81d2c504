#pragma once
// A thin RAII layer over SQLite for the conversation store: one connection (Db), prepared
// statements (Stmt) with typed binds and reads, and transactions that roll back unless
// committed. Every SQLite failure becomes a tandem::Error naming the statement and the file.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace tandem::store::sql {

class Db {
 public:
  // Opens (creating) the database file; throws Error(kIo) when it cannot.
  explicit Db(const std::filesystem::path& file);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Runs one or more statements without results.
  void exec(std::string_view sql);
  // Rows changed by the last INSERT, UPDATE or DELETE.
  int changes() const;
  sqlite3* handle() const { return db_; }
  const std::string& file() const { return file_; }
  [[noreturn]] void fail_here(std::string_view what) const;

 private:
  sqlite3* db_ = nullptr;
  std::string file_;
};

class Stmt {
 public:
  Stmt(Db& db, std::string_view sql);
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  // Binds by 1-based index; returns *this so binds chain.
  Stmt& bind(int i, std::string_view v);
  Stmt& bind(int i, int64_t v);
  Stmt& bind_null(int i);
  // Steps once: true while a row is available, false when done.
  bool step();
  // Steps to the end (statements without rows).
  void run();
  // Ready to run again with new binds.
  void reset();

  std::string text(int col) const;
  std::optional<std::string> text_or_null(int col) const;
  int64_t int64(int col) const;

 private:
  Db& db_;
  sqlite3_stmt* st_ = nullptr;
  std::string sql_;
};

// BEGIN IMMEDIATE on construction, ROLLBACK on destruction unless commit() ran.
class Transaction {
 public:
  explicit Transaction(Db& db);
  ~Transaction();
  void commit();

 private:
  Db& db_;
  bool done_ = false;
};

}  // namespace tandem::store::sql
