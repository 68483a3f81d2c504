#include "store/blob_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "store/model_store_io.h"

namespace fs = std::filesystem;

namespace tandem::store {
namespace {

constexpr size_t kBuf = 8u << 20;
constexpr uint64_t kProgressEvery = 64u << 20;
constexpr const char* kTmpPrefix = ".tmp-";

bool lower_hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string hex_of(Sha256& h) {
  return "sha256:" + h.hex_digest();
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

int open_read(const fs::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) fail(ErrorKind::kNotFound, "{}: no such file", p.string());
    fail(ErrorKind::kIo, "cannot read {}: {}", p.string(), std::strerror(errno));
  }
  return fd;
}

// Reads all of `fd`, handing each chunk to `sink`; progress every kProgressEvery bytes.
template <class Sink>
void read_all(int fd, const fs::path& p, uint64_t total, const ProgressFn& progress,
              const std::string& label, const std::string& stage, Sink&& sink) {
  std::unique_ptr<char[]> buf(new char[kBuf]);
  uint64_t done = 0, next_report = kProgressEvery;
  if (progress) progress({stage, label, 0, total});
  for (;;) {
    ssize_t n = ::read(fd, buf.get(), kBuf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(ErrorKind::kIo, "cannot read {}: {}", p.string(), std::strerror(errno));
    if (n == 0) break;
    sink(buf.get(), size_t(n));
    done += uint64_t(n);
    if (progress && done >= next_report) {
      progress({stage, label, done, std::max(total, done)});
      next_report = done + kProgressEvery;
    }
  }
  if (progress) progress({stage, label, done, std::max(total, done)});
}

}  // namespace

bool is_digest(std::string_view d) {
  if (d.size() != 71) return false;
  if (d.substr(0, 7) != "sha256:" && d.substr(0, 7) != "sha256-") return false;
  return lower_hex(d.substr(7));
}

std::string normalize_digest(std::string_view d) {
  if (!is_digest(d))
    fail(ErrorKind::kInvalidArgument,
         "'{}' is not a digest (expected sha256:<64 lowercase hex digits>)", d);
  return "sha256:" + std::string(d.substr(7));
}

std::string hash_file(const fs::path& path, const ProgressFn& progress, const std::string& label,
                      const std::string& stage) {
  Fd f{open_read(path)};
  std::error_code ec;
  uint64_t total = fs::file_size(path, ec);
  Sha256 h;
  read_all(f.fd, path, ec ? 0 : total, progress, label.empty() ? path.filename().string() : label,
           stage, [&](const char* p, size_t n) { h.update(p, n); });
  return hex_of(h);
}

BlobWriter::BlobWriter(const BlobStore& store) : store_(store) {
  std::error_code ec;
  fs::create_directories(store_.dir_, ec);
  if (ec) fail(ErrorKind::kIo, "cannot create {}: {}", store_.dir_.string(), ec.message());
  std::random_device rd;
  tmp_ = store_.dir_ / fmt::format("{}{:08x}{:08x}", kTmpPrefix, rd(), rd());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0)
    fail(ErrorKind::kIo, "cannot write a blob in {}: {}", store_.dir_.string(),
         std::strerror(errno));
  ::flock(fd_, LOCK_EX);  // tells sweep_temp() that this file has a live writer
}

BlobWriter::~BlobWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!done_) ::unlink(tmp_.c_str());
}

void BlobWriter::write(const void* data, size_t len) {
  auto p = static_cast<const char*>(data);
  sha_.update(p, len);
  size_ += len;
  while (len > 0) {
    ssize_t n = ::write(fd_, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      fail(ErrorKind::kIo, "cannot write a blob in {}: {}", store_.dir_.string(),
           std::strerror(errno));
    p += n;
    len -= size_t(n);
  }
}

std::string BlobWriter::commit(const std::optional<std::string>& expected) {
  const std::string digest = hex_of(sha_);
  if (expected && normalize_digest(*expected) != digest)
    fail(ErrorKind::kInvalidArgument,
         "the data does not match its digest: announced {}, received {} ({} bytes)", *expected,
         digest, size_);
  if (::fsync(fd_) != 0)
    fail(ErrorKind::kIo, "cannot write a blob in {}: {}", store_.dir_.string(),
         std::strerror(errno));
  const fs::path final_path = store_.path(digest);
  if (store_.has(digest)) {
    ::unlink(tmp_.c_str());  // the same bytes are there already
  } else {
    if (::rename(tmp_.c_str(), final_path.c_str()) != 0)
      fail(ErrorKind::kIo, "cannot publish blob {}: {}", digest, std::strerror(errno));
    fsync_dir(store_.dir_);
    store_.record_stamp(final_path, digest);
  }
  ::close(fd_);
  fd_ = -1;
  done_ = true;
  return digest;
}

BlobStore::BlobStore(fs::path root)
    : root_(std::move(root)), dir_(root_ / "blobs"), stamps_(root_ / "verified") {}

fs::path BlobStore::path(const std::string& digest) const {
  std::string d = normalize_digest(digest);
  return dir_ / ("sha256-" + d.substr(7));
}

bool BlobStore::has(const std::string& digest) const {
  std::error_code ec;
  return fs::is_regular_file(path(digest), ec);
}

uint64_t BlobStore::size(const std::string& digest) const {
  std::error_code ec;
  uint64_t n = fs::file_size(path(digest), ec);
  if (ec) fail(ErrorKind::kNotFound, "blob {} is not in the store", digest);
  return n;
}

std::string BlobStore::put_file(const fs::path& src, const ProgressFn& progress,
                                const std::string& label) const {
  Fd f{open_read(src)};
  std::error_code ec;
  uint64_t total = fs::file_size(src, ec);
  BlobWriter w(*this);
  read_all(f.fd, src, ec ? 0 : total, progress, label.empty() ? src.filename().string() : label,
           "copying", [&](const char* p, size_t n) { w.write(p, n); });
  return w.commit();
}

fs::path BlobStore::stamp_path(const fs::path& file) const {
  std::error_code ec;
  fs::path abs = fs::absolute(file, ec);
  return stamps_ / (sha256_hex(abs.lexically_normal().string()) + ".json");
}

void BlobStore::record_stamp(const fs::path& file, const std::string& digest) const {
  try {
    FileStamp s = stamp_of(file);
    nlohmann::ordered_json j = {{"path", fs::absolute(file).lexically_normal().string()},
                                {"digest", digest},
                                {"size", s.size},
                                {"mtime_ns", s.mtime_ns},
                                {"inode", s.inode}};
    write_file_atomic(stamp_path(file), j.dump() + "\n");
  } catch (const Error&) {
    // A stamp only saves work later; failing to write one loses nothing.
  }
}

bool BlobStore::stamp_fresh(const fs::path& file, const std::string& digest) const {
  fs::path sp = stamp_path(file);
  std::error_code ec;
  if (!fs::exists(sp, ec)) return false;
  try {
    auto j = nlohmann::json::parse(read_file(sp), nullptr, false);
    if (!j.is_object() || j.value("digest", "") != digest) return false;
    FileStamp now = stamp_of(file);
    FileStamp then{j.value("size", uint64_t(0)), j.value("mtime_ns", int64_t(0)),
                   j.value("inode", uint64_t(0))};
    return now == then;
  } catch (const Error&) {
    return false;
  }
}

void BlobStore::verify_file(const fs::path& file, const std::string& digest, bool full,
                            const ProgressFn& progress, const std::string& label) const {
  const std::string want = normalize_digest(digest);
  std::error_code ec;
  if (!fs::exists(file, ec))
    fail(ErrorKind::kNotFound, "{} is missing ({})", label.empty() ? file.string() : label,
         file.string());
  if (!full && stamp_fresh(file, want)) return;
  const std::string got = hash_file(file, progress, label, "verifying");
  if (got != want)
    fail(ErrorKind::kInvalidArgument,
         "{} is corrupted: it should hold {} but its bytes hash to {} ({}); restore it or "
         "import the model again",
         label.empty() ? file.filename().string() : label, want, got, file.string());
  record_stamp(file, want);
}

std::string BlobStore::hash_in_place(const fs::path& file, const ProgressFn& progress,
                                     const std::string& label) const {
  const FileStamp before = stamp_of(file);
  std::string d = hash_file(file, progress, label, "hashing");
  if (stamp_of(file) == before) record_stamp(file, d);  // not changed while it was read
  return d;
}

std::vector<std::string> BlobStore::list() const {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return out;
  for (auto& e : fs::directory_iterator(dir_, ec)) {
    std::string n = e.path().filename().string();
    if (n.size() == 71 && n.rfind("sha256-", 0) == 0 && is_digest(n))
      out.push_back("sha256:" + n.substr(7));
  }
  return out;
}

void BlobStore::remove(const std::string& digest) const {
  fs::path p = path(digest);
  std::error_code ec;
  fs::remove(stamp_path(p), ec);
  fs::remove(p, ec);
  if (ec) fail(ErrorKind::kIo, "cannot remove blob {}: {}", digest, ec.message());
}

void BlobStore::sweep_temp() const {
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return;
  const auto now = fs::file_time_type::clock::now();
  for (auto& e : fs::directory_iterator(dir_, ec)) {
    if (e.path().filename().string().rfind(kTmpPrefix, 0) != 0) continue;
    std::error_code tec;
    auto t = fs::last_write_time(e.path(), tec);
    if (tec || now - t < std::chrono::minutes(1)) continue;  // a writer may be just starting
    Fd f{::open(e.path().c_str(), O_RDONLY | O_CLOEXEC)};
    if (f.fd < 0) continue;
    if (::flock(f.fd, LOCK_EX | LOCK_NB) == 0) ::unlink(e.path().c_str());
  }
}

}  // namespace tandem::store
