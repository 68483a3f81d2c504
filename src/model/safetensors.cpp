#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"

namespace tandem::model {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* dtype_name(DType d) {
  switch (d) {
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kF32:
      return "F32";
    case DType::kF8E4M3:
      return "F8_E4M3";
    default:
      return "other";
  }
}

size_t dtype_size(DType d) {
  switch (d) {
    case DType::kBF16:
    case DType::kF16:
      return 2;
    case DType::kF32:
      return 4;
    case DType::kF8E4M3:
      return 1;
    default:
      return 0;
  }
}

namespace {

// Element sizes of every dtype the format defines (so foreign tensors validate too).
size_t any_dtype_size(const std::string& s) {
  static const std::map<std::string, size_t> k = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
      {"F32", 4},  {"F64", 8}, {"I64", 8}, {"U64", 8}};
  auto it = k.find(s);
  return it == k.end() ? 0 : it->second;
}

DType to_dtype(const std::string& s) {
  if (s == "BF16") return DType::kBF16;
  if (s == "F16") return DType::kF16;
  if (s == "F32") return DType::kF32;
  if (s == "F8_E4M3") return DType::kF8E4M3;
  return DType::kOther;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

SafetensorsHeader parse_safetensors_header(std::string_view prefix, uint64_t file_size,
                                           const std::string& where) {
  constexpr uint64_t kMaxHeader = 100u << 20;
  if (file_size < 8 || prefix.size() < 8)
    fail(ErrorKind::kInvalidArgument, "{}: {} bytes is too short for a safetensors file", where,
         file_size);
  SafetensorsHeader h;
  for (int i = 0; i < 8; ++i) h.header_len |= uint64_t(uint8_t(prefix[size_t(i)])) << (8 * i);
  if (h.header_len > kMaxHeader)
    fail(ErrorKind::kInvalidArgument, "{}: header length {} exceeds the 100 MB limit (corrupt?)",
         where, h.header_len);
  h.data_start = 8 + h.header_len;
  if (h.data_start > file_size || h.data_start > prefix.size())
    fail(ErrorKind::kInvalidArgument,
         "{}: truncated: the header needs {} bytes but the file has {}", where, h.data_start,
         file_size);
  const uint64_t data_len = file_size - h.data_start;
  json j;
  try {
    j = json::parse(prefix.substr(8, h.header_len));
  } catch (const json::exception& e) {
    fail(ErrorKind::kInvalidArgument, "{}: header is not valid JSON: {}", where, e.what());
  }
  if (!j.is_object()) fail(ErrorKind::kInvalidArgument, "{}: header is not a JSON object", where);

  for (auto& item : j.items()) {
    const std::string& name = item.key();  // (a structured binding can't be captured)
    const json& t = item.value();
    if (name == "__metadata__") {
      if (!t.is_object())
        fail(ErrorKind::kInvalidArgument, "{}: __metadata__ is not an object", where);
      for (auto& [k, v] : t.items())
        h.metadata[k] = v.is_string() ? v.get<std::string>() : v.dump();
      continue;
    }
    auto bad = [&](const std::string& why) {
      fail(ErrorKind::kInvalidArgument, "{}: tensor '{}': {}", where, name, why);
    };
    if (!t.is_object()) bad("entry is not an object");
    TensorInfo ti;
    ti.name = name;
    auto d = t.find("dtype");
    if (d == t.end() || !d->is_string()) bad("missing dtype");
    ti.dtype_str = d->get<std::string>();
    ti.dtype = to_dtype(ti.dtype_str);
    size_t esize = any_dtype_size(ti.dtype_str);
    if (esize == 0) bad("unknown dtype '" + ti.dtype_str + "'");
    auto s = t.find("shape");
    if (s == t.end() || !s->is_array()) bad("missing shape");
    if (s->size() > 8) bad("more than 8 dimensions");
    uint64_t bytes = esize;
    for (auto& dim : *s) {
      if (!dim.is_number_unsigned()) bad("shape " + s->dump() + " has a non-integer or negative");
      uint64_t v = dim.get<uint64_t>();
      if (v > (uint64_t(1) << 40) || (v != 0 && bytes > (uint64_t(1) << 50) / v))
        bad("shape " + s->dump() + " is too large");
      bytes *= v;
      ti.shape.push_back(int64_t(v));
    }
    auto o = t.find("data_offsets");
    if (o == t.end() || !o->is_array() || o->size() != 2 || !(*o)[0].is_number_unsigned() ||
        !(*o)[1].is_number_unsigned())
      bad("data_offsets must be [begin, end]");
    ti.begin = (*o)[0].get<uint64_t>();
    ti.end = (*o)[1].get<uint64_t>();
    if (ti.begin > ti.end) bad("data_offsets begin > end");
    if (ti.end > data_len)
      bad(fmt::format("data [{}, {}) runs past the end of the data ({} bytes): file truncated?",
                      ti.begin, ti.end, data_len));
    if (ti.end - ti.begin != bytes)
      bad(fmt::format("{} x {} needs {} bytes but data_offsets span {}", ti.dtype_str,
                      shape_str(ti.shape), bytes, ti.end - ti.begin));
    h.tensors.push_back(std::move(ti));
  }
  // No two tensors may share bytes.
  std::vector<const TensorInfo*> by_off;
  for (auto& t : h.tensors)
    if (t.end > t.begin) by_off.push_back(&t);
  std::sort(by_off.begin(), by_off.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_off.size(); ++i)
    if (by_off[i]->begin < by_off[i - 1]->end)
      fail(ErrorKind::kInvalidArgument, "{}: tensor '{}' overlaps tensor '{}'", where,
           by_off[i]->name, by_off[i - 1]->name);
  return h;
}

MappedFile::MappedFile(const fs::path& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail(errno == ENOENT ? ErrorKind::kNotFound : ErrorKind::kIo, "{}: cannot open: {}",
         path.string(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    fail(ErrorKind::kIo, "{}: cannot stat: {}", path.string(), std::strerror(e));
  }
  size_ = uint64_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      fail(ErrorKind::kIo, "{}: cannot map {} bytes: {}", path.string(), size_, std::strerror(e));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

Checkpoint::Checkpoint(const fs::path& dir) : dir_(dir) {
  std::vector<std::string> shard_names;
  std::map<std::string, std::string> weight_map;
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    json j;
    try {
      j = json::parse(read_file(index));
    } catch (const json::exception& e) {
      fail(ErrorKind::kInvalidArgument, "{}: invalid JSON: {}", index.string(), e.what());
    }
    auto wm = j.find("weight_map");
    if (!j.is_object() || wm == j.end() || !wm->is_object())
      fail(ErrorKind::kInvalidArgument, "{}: no weight_map object", index.string());
    std::set<std::string> seen;
    for (auto& [name, file] : wm->items()) {
      if (!file.is_string())
        fail(ErrorKind::kInvalidArgument, "{}: weight_map['{}'] is not a file name", index.string(),
             name);
      std::string f = file.get<std::string>();
      if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
        fail(ErrorKind::kInvalidArgument, "{}: weight_map['{}'] = '{}' leaves the folder",
             index.string(), name, f);
      weight_map[name] = f;
      if (seen.insert(f).second) shard_names.push_back(f);
    }
  } else if (fs::exists(dir / "model.safetensors")) {
    shard_names.push_back("model.safetensors");
  } else {
    fail(ErrorKind::kNotFound,
         "{}: no model.safetensors or model.safetensors.index.json in this folder", dir.string());
  }
  std::map<std::string, size_t> shard_of;
  for (auto& s : shard_names) {
    files_.push_back(std::make_unique<MappedFile>(dir / s));
    auto& f = *files_.back();
    std::string_view all(reinterpret_cast<const char*>(f.data()), f.size());
    headers_.push_back(std::make_unique<SafetensorsHeader>(
        parse_safetensors_header(all, f.size(), (dir / s).string())));
    shard_of[s] = files_.size() - 1;
  }
  for (size_t i = 0; i < files_.size(); ++i)
    for (auto& t : headers_[i]->tensors) {
      if (index_.count(t.name))
        fail(ErrorKind::kInvalidArgument, "{}: tensor '{}' appears in two shards", dir.string(),
             t.name);
      index_[t.name] = Entry{files_[i].get(), &t, headers_[i]->data_start};
    }
  for (auto& [name, file] : weight_map) {
    auto it = index_.find(name);
    if (it == index_.end() || it->second.file != files_[shard_of[file]].get())
      fail(ErrorKind::kInvalidArgument,
           "{}: the index places tensor '{}' in {}, but that shard does not hold it", dir.string(),
           name, file);
  }
}

TensorView Checkpoint::get(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end())
    fail(ErrorKind::kNotFound, "{}: tensor '{}' is missing from the checkpoint", dir_.string(),
         name);
  const Entry& e = it->second;
  TensorView v;
  v.data = e.file->data() + e.data_start + e.info->begin;
  v.dtype = e.info->dtype;
  v.shape = e.info->shape;
  v.name = &e.info->name;
  return v;
}

TensorView Checkpoint::get(const std::string& name, std::vector<int64_t> shape,
                           std::initializer_list<DType> allowed) const {
  TensorView v = get(name);
  auto it = index_.find(name);
  if (std::find(allowed.begin(), allowed.end(), v.dtype) == allowed.end()) {
    std::string ok;
    for (auto d : allowed) ok += std::string(ok.empty() ? "" : ", ") + dtype_name(d);
    fail(ErrorKind::kUnsupported, "{}: tensor '{}' has dtype {} (supported here: {})",
         dir_.string(), name, it->second.info->dtype_str, ok);
  }
  if (v.shape != shape)
    fail(ErrorKind::kInvalidArgument, "{}: tensor '{}' has shape {} but config.json implies {}",
         dir_.string(), name, shape_str(v.shape), shape_str(shape));
  return v;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (auto& [name, e] : index_) n += e.info->end - e.info->begin;
  return n;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> r;
  for (auto& [name, e] : index_) r.push_back(name);
  return r;
}

void Checkpoint::prefetch() const {
  for (auto& f : files_)
    if (f->data()) ::madvise(const_cast<uint8_t*>(f->data()), f->size(), MADV_WILLNEED);
}

}  // namespace tandem::model
