#include "tokenizer/byte_level.h"

namespace tandem::tok {
namespace {

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> from_cp{};  // code point (< 0x144) -> byte, or -1
  Tables() {
    from_cp.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      to_cp[b] = self ? uint32_t(b) : next++;
      from_cp[to_cp[b]] = int16_t(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t b) {
  return tables().to_cp[b];
}

std::optional<std::string> byte_level_decode(std::string_view tok) {
  const auto& t = tables();
  std::string out;
  out.reserve(tok.size());
  auto* s = reinterpret_cast<const unsigned char*>(tok.data());
  size_t i = 0, n = tok.size();
  while (i < n) {
    uint32_t cp;
    if (s[i] < 0x80) {
      cp = s[i++];
    } else if ((s[i] & 0xE0) == 0xC0 && i + 1 < n) {
      cp = ((s[i] & 0x1F) << 6) | (s[i + 1] & 0x3F);
      i += 2;
    } else {
      return std::nullopt;  // three- and four-byte characters are outside the alphabet
    }
    if (cp >= t.from_cp.size() || t.from_cp[cp] < 0) return std::nullopt;
    out.push_back(char(t.from_cp[cp]));
  }
  return out;
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    uint32_t cp = tables().to_cp[b];
    if (cp < 0x80) {
      out.push_back(char(cp));
    } else {
      out.push_back(char(0xC0 | (cp >> 6)));
      out.push_back(char(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

}  // namespace tandem::tok
