#pragma once
// Filesystem helpers with clear errors. Outputs that must never be seen half-written
// (a model folder) are built in a staging folder and published with one rename.
#include <filesystem>
#include <string>
#include <string_view>

namespace tandem {

std::string read_file(const std::filesystem::path& path);  // throws Error(kIo/kNotFound)
void write_file(const std::filesystem::path& path, std::string_view data);

// A folder that appears at `target` only when commit() succeeds. The target must not
// exist or be an empty folder; otherwise the constructor throws before anything is written.
class StagingDir {
 public:
  explicit StagingDir(std::filesystem::path target);
  ~StagingDir();  // removes the staging folder unless committed
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;

  const std::filesystem::path& path() const { return staging_; }
  void commit();

 private:
  std::filesystem::path target_;
  std::filesystem::path staging_;
  bool committed_ = false;
};

// The folder of the running executable (for finding files installed beside it).
std::filesystem::path executable_dir();

}  // namespace tandem
