#pragma once
// SHA-256 (FIPS 180-4), used to verify the tokenizer files and to name model digests.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t len);
  std::array<uint8_t, 32> digest();  // finalizes; the object must not be updated after
  std::string hex_digest();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string sha256_hex(std::string_view data);
std::string sha256_file_hex(const std::string& path);  // throws Error(kIo) when unreadable

}  // namespace tandem
