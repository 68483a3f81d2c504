#pragma once
// Reading .safetensors checkpoints: memory-mapped, single file or sharded through
// model.safetensors.index.json. Nothing is copied: a TensorView points into the mapping.
//
// File: u64 little-endian N | N bytes of JSON header | data. Header entries:
//   name -> {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [begin, end)}
// with offsets relative to the start of the data. Every header is validated before use:
// offsets in bounds and not overlapping, byte length = dtype size x shape, so a truncated
// or corrupt file is an Error naming the file and tensor, never a crash.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::model {

enum class DType { kBF16, kF16, kF32, kF8E4M3, kOther };
const char* dtype_name(DType d);
size_t dtype_size(DType d);  // 0 for kOther

struct TensorInfo {
  std::string name;
  std::string dtype_str;  // as written, e.g. "BF16"
  DType dtype = DType::kOther;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range within the data section
  int64_t numel() const;
};

struct SafetensorsHeader {
  uint64_t header_len = 0;          // N
  uint64_t data_start = 0;          // 8 + N
  std::vector<TensorInfo> tensors;  // in header order
  std::map<std::string, std::string> metadata;
};

// Parses and validates the header of a file of `file_size` bytes whose first bytes are
// `prefix` (at least 8 + N of them, or the whole file if shorter). Pure: safe to fuzz.
// Throws Error(kInvalidArgument) naming `where` and the offending tensor.
SafetensorsHeader parse_safetensors_header(std::string_view prefix, uint64_t file_size,
                                           const std::string& where);

struct TensorView {
  const void* data = nullptr;
  DType dtype = DType::kOther;
  std::vector<int64_t> shape;
  const std::string* name = nullptr;
  int64_t numel() const;
  size_t bytes() const { return size_t(numel()) * dtype_size(dtype); }
};

// A read-only memory mapping of one file.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);  // throws Error(kIo/kNotFound)
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// Every tensor of a checkpoint folder: model.safetensors, or the shards listed by
// model.safetensors.index.json.
class Checkpoint {
 public:
  explicit Checkpoint(const std::filesystem::path& dir);
  const std::filesystem::path& dir() const { return dir_; }
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  // Throws Error(kNotFound) naming the tensor and the folder.
  TensorView get(const std::string& name) const;
  // get() plus a check of dtype (any of `allowed`) and exact shape; errors name the tensor.
  TensorView get(const std::string& name, std::vector<int64_t> shape,
                 std::initializer_list<DType> allowed) const;
  uint64_t total_bytes() const;  // of all tensor data
  std::vector<std::string> names() const;
  // Asks the kernel to read the mapped files ahead (MADV_WILLNEED).
  void prefetch() const;

 private:
  struct Entry {
    const MappedFile* file;
    const TensorInfo* info;
    uint64_t data_start;
  };
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<std::unique_ptr<SafetensorsHeader>> headers_;
  std::map<std::string, Entry> index_;
};

}  // namespace tandem::model
