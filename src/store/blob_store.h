#pragma once
// Content-addressed files: `blobs/sha256-<hex>` holds the bytes whose SHA-256 is <hex>.
// A blob is written to a locked temporary file beside it while it is hashed, and renamed
// into place only when its digest is known (and matches the one a client announced), so a
// crash never leaves a blob whose name lies. A temporary file whose writer died (its lock
// is free) is removed by sweep_temp().
//
// Verification: verify() hashes a file and compares; a file found good is stamped (size,
// modification time, inode) in `verified/`, and is read again only once its stamp changed
// (or when `full` asks), as git trusts its index. A blob that does not hold its digest is
// refused with both digests named.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/sha256.h"

namespace tandem::store {

struct ProgressEvent {
  std::string stage;  // "hashing", "copying", "verifying"
  std::string file;   // the file's name as the user knows it
  uint64_t done = 0, total = 0;
};
using ProgressFn = std::function<void(const ProgressEvent&)>;

// "sha256:<64 lowercase hex>". Also accepts Ollama's file form "sha256-<hex>".
bool is_digest(std::string_view d);
std::string normalize_digest(std::string_view d);  // throws Error(kInvalidArgument)

// "sha256:<hex>" of a file's bytes, reporting progress every few MiB.
std::string hash_file(const std::filesystem::path& path, const ProgressFn& progress = {},
                      const std::string& label = {}, const std::string& stage = "hashing");

class BlobStore;

// One blob being written.
class BlobWriter {
 public:
  explicit BlobWriter(const BlobStore& store);
  ~BlobWriter();  // removes the temporary file unless committed
  BlobWriter(const BlobWriter&) = delete;
  BlobWriter& operator=(const BlobWriter&) = delete;

  void write(const void* data, size_t len);
  uint64_t size() const { return size_; }
  // Flushes and publishes the blob; returns its digest. With `expected`, a different digest
  // is refused (Error kInvalidArgument naming both) and nothing is published.
  std::string commit(const std::optional<std::string>& expected = std::nullopt);

 private:
  const BlobStore& store_;
  std::filesystem::path tmp_;
  int fd_ = -1;
  Sha256 sha_;
  uint64_t size_ = 0;
  bool done_ = false;
};

class BlobStore {
 public:
  // `root` is the models folder; blobs live in root/blobs, stamps in root/verified.
  explicit BlobStore(std::filesystem::path root);

  std::filesystem::path path(const std::string& digest) const;  // whether or not it exists
  bool has(const std::string& digest) const;
  uint64_t size(const std::string& digest) const;  // throws Error(kNotFound)

  // Copies `src` into a blob, hashing as it copies (progress: "copying"); returns the digest.
  // An existing blob of the same digest is kept.
  std::string put_file(const std::filesystem::path& src, const ProgressFn& progress = {},
                       const std::string& label = {}) const;

  // Checks that `path` holds `digest` (see above). Throws Error(kInvalidArgument) when not,
  // Error(kNotFound) when the file is missing.
  void verify_file(const std::filesystem::path& path, const std::string& digest, bool full,
                   const ProgressFn& progress = {}, const std::string& label = {}) const;
  void verify(const std::string& digest, bool full, const ProgressFn& progress = {},
              const std::string& label = {}) const {
    verify_file(path(digest), digest, full, progress, label);
  }

  // hash_file() of a file outside blobs/ (kept by reference), stamped as verified.
  std::string hash_in_place(const std::filesystem::path& path, const ProgressFn& progress = {},
                            const std::string& label = {}) const;

  std::vector<std::string> list() const;  // digests of the blobs present
  void remove(const std::string& digest) const;
  void sweep_temp() const;

  const std::filesystem::path& dir() const { return dir_; }

 private:
  friend class BlobWriter;
  std::filesystem::path stamp_path(const std::filesystem::path& file) const;
  void record_stamp(const std::filesystem::path& file, const std::string& digest) const;
  bool stamp_fresh(const std::filesystem::path& file, const std::string& digest) const;

  std::filesystem::path root_, dir_, stamps_;
};

}  // namespace tandem::store
