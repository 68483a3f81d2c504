#pragma once
// File primitives of the model store: files published whole (written beside their target,
// flushed, renamed over it, the folder flushed), advisory locks, and times as RFC 3339.
// A crash at any point leaves either the old file or the new one, never a mix.
#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>

namespace tandem::store {

void write_file_atomic(const std::filesystem::path& path, std::string_view data);
void fsync_dir(const std::filesystem::path& dir);

// An flock(2) lock on a file (created if missing), released by the destructor.
class FileLock {
 public:
  enum class Mode { kShared, kExclusive };
  FileLock(const std::filesystem::path& path, Mode mode);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

// "2025-06-01T12:34:56.123456789Z" (UTC; nanoseconds as Ollama's Go times print them).
std::string rfc3339(std::chrono::system_clock::time_point t);
std::string rfc3339_now();

// A file's identity for "has it changed since": size, modification time and inode.
struct FileStamp {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t inode = 0;
  bool operator==(const FileStamp&) const = default;
};
// Throws Error(kNotFound/kIo).
FileStamp stamp_of(const std::filesystem::path& path);

}  // namespace tandem::store
