#include "store/model_store_io.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "core/error.h"

namespace fs = std::filesystem;

namespace tandem::store {

void fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the rename itself is what makes the file whole
  ::fsync(fd);
  ::close(fd);
}

void write_file_atomic(const fs::path& path, std::string_view data) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  std::random_device rd;
  fs::path tmp = path.parent_path() /
                 fmt::format(".{}.tmp-{:08x}{:08x}", path.filename().string(), rd(), rd());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail(ErrorKind::kIo, "cannot write {}: {}", tmp.string(), std::strerror(errno));
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail(ErrorKind::kIo, "cannot write {}: {}", path.string(), std::strerror(e));
    }
    off += size_t(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    fail(ErrorKind::kIo, "cannot write {}: {}", path.string(), std::strerror(e));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    fail(ErrorKind::kIo, "cannot publish {}: {}", path.string(), std::strerror(e));
  }
  fsync_dir(path.parent_path());
}

FileLock::FileLock(const fs::path& path, Mode mode) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(ErrorKind::kIo, "cannot open lock {}: {}", path.string(), std::strerror(errno));
  int op = mode == Mode::kShared ? LOCK_SH : LOCK_EX;
  while (::flock(fd_, op) != 0) {
    if (errno == EINTR) continue;
    int e = errno;
    ::close(fd_);
    fail(ErrorKind::kIo, "cannot lock {}: {}", path.string(), std::strerror(e));
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

std::string rfc3339(std::chrono::system_clock::time_point t) {
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  std::time_t secs = std::time_t(ns / 1000000000);
  long frac = long(ns % 1000000000);
  if (frac < 0) {
    frac += 1000000000;
    --secs;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
}

std::string rfc3339_now() {
  return rfc3339(std::chrono::system_clock::now());
}

FileStamp stamp_of(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) fail(ErrorKind::kNotFound, "{}: no such file", path.string());
    fail(ErrorKind::kIo, "{}: {}", path.string(), std::strerror(errno));
  }
  FileStamp s;
  s.size = uint64_t(st.st_size);
  s.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  s.inode = uint64_t(st.st_ino);
  return s;
}

}  // namespace tandem::store
