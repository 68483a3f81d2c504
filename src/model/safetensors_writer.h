#pragma once
// Writes a .safetensors file: u64 little-endian header length, JSON header (space-padded to
// 8 bytes), then the tensor bytes back to back in header order.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tandem::model {

struct TensorBlob {
  std::string name;
  std::string dtype;  // safetensors dtype name, e.g. "BF16"
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

// Tensors are written sorted by name, so equal inputs give equal bytes.
void write_safetensors(const std::filesystem::path& path, std::vector<TensorBlob>& tensors);

}  // namespace tandem::model
