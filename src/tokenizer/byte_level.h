#pragma once
// GPT-2 byte-level alphabet: every byte is shown as one printable code point so that BPE
// vocabularies can be stored as text. Bytes 33-126, 161-172 and 174-255 stand for
// themselves; the other 68 bytes map, in increasing order, to U+0100, U+0101, ...
// (space -> U+0120 'Ġ', '\n' -> U+010A 'Ċ').
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::tok {

// The code point that stands for byte b.
uint32_t byte_to_codepoint(uint8_t b);

// Decodes a byte-level token string (UTF-8 of alphabet code points) back to raw bytes.
// Returns nullopt when a character is not in the alphabet (such a token is then taken
// as its own UTF-8 bytes, as Hugging Face's ByteLevel decoder does).
std::optional<std::string> byte_level_decode(std::string_view token);

// Encodes raw bytes into the byte-level alphabet (for tests and diagnostics).
std::string byte_level_encode(std::string_view bytes);

}  // namespace tandem::tok
