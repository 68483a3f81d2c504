#include "core/fs.h"

#include <unistd.h>

#include <fstream>
#include <random>
#include <system_error>

#include "core/error.h"

namespace fs = std::filesystem;

namespace tandem {

std::string read_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(ErrorKind::kNotFound, "{}: no such file", path.string());
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::kIo, "{}: cannot open for reading", path.string());
  std::string data;
  in.seekg(0, std::ios::end);
  data.resize(size_t(in.tellg()));
  in.seekg(0);
  in.read(data.data(), std::streamsize(data.size()));
  if (!in) fail(ErrorKind::kIo, "{}: read failed", path.string());
  return data;
}

void write_file(const fs::path& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(ErrorKind::kIo, "{}: cannot open for writing", path.string());
  out.write(data.data(), std::streamsize(data.size()));
  out.flush();
  if (!out) fail(ErrorKind::kIo, "{}: write failed (disk full?)", path.string());
}

StagingDir::StagingDir(fs::path target) : target_(std::move(target)) {
  std::error_code ec;
  if (fs::exists(target_, ec)) {
    if (!fs::is_directory(target_, ec))
      fail(ErrorKind::kInvalidArgument, "{} exists and is not a folder", target_.string());
    if (!fs::is_empty(target_, ec))
      fail(ErrorKind::kInvalidArgument, "{} is not empty; refusing to overwrite it",
           target_.string());
  }
  fs::path parent = fs::absolute(target_, ec).parent_path();
  if (!fs::exists(parent, ec)) {
    fs::create_directories(parent, ec);
    if (ec) fail(ErrorKind::kIo, "cannot create {}: {}", parent.string(), ec.message());
  }
  if (access(parent.c_str(), W_OK) != 0)
    fail(ErrorKind::kIo, "{}: no permission to write here", parent.string());
  std::random_device rd;
  staging_ =
      parent / fmt::format(".{}.partial-{:08x}", fs::absolute(target_).filename().string(), rd());
  fs::create_directory(staging_, ec);
  if (ec) fail(ErrorKind::kIo, "cannot create {}: {}", staging_.string(), ec.message());
}

StagingDir::~StagingDir() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(staging_, ec);
  }
}

void StagingDir::commit() {
  std::error_code ec;
  if (fs::exists(target_, ec)) {
    fs::remove(target_, ec);  // only succeeds on an empty folder, checked at construction
    if (ec) fail(ErrorKind::kIo, "cannot replace {}: {}", target_.string(), ec.message());
  }
  fs::rename(staging_, target_, ec);
  if (ec) fail(ErrorKind::kIo, "cannot publish {}: {}", target_.string(), ec.message());
  committed_ = true;
}

fs::path executable_dir() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : p.parent_path();
}

}  // namespace tandem
