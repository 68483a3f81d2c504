#include "model/safetensors_writer.h"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tandem::model {

void write_safetensors(const std::filesystem::path& path, std::vector<TensorBlob>& tensors) {
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorBlob& a, const TensorBlob& b) { return a.name < b.name; });
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string h = header.dump();
  while (h.size() % 8) h += ' ';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(ErrorKind::kIo, "{}: cannot open for writing", path.string());
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(h.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(h.data(), std::streamsize(h.size()));
  for (const auto& t : tensors)
    out.write(reinterpret_cast<const char*>(t.data.data()), std::streamsize(t.data.size()));
  out.flush();
  if (!out) fail(ErrorKind::kIo, "{}: write failed (disk full?)", path.string());
}

}  // namespace tandem::model
