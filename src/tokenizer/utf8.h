#pragma once
// UTF-8 helpers shared by the encoder and the decoders.
//
// Invalid UTF-8 is replaced the way Python's bytes.decode("utf-8", "replace") and Rust's
// String::from_utf8_lossy both do it (Unicode's "maximal subpart" practice): each maximal
// prefix of a well-formed sequence that cannot be completed becomes one U+FFFD. Hugging
// Face's decoders use exactly this, and a Python caller must make this choice before it can
// hand text to `tokenizers`; see docs/TOKENIZER.md.
#include <cstddef>
#include <string>
#include <string_view>

namespace tandem::tok {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Length of the longest prefix of `s` that is well-formed UTF-8.
size_t valid_utf8_prefix(std::string_view s);

// `s` with every ill-formed subsequence replaced by U+FFFD (maximal-subpart rule).
std::string to_valid_utf8(std::string_view s);

// Appends to `out` the part of `in` that is final and returns how many bytes of `in` were
// consumed: complete characters pass through, ill-formed subsequences become U+FFFD, and a
// trailing sequence that could still be completed by more bytes is left unconsumed.
size_t append_final_utf8(std::string_view in, std::string& out);

// The NFC form of valid UTF-8 `s`. Only the spans around characters that NFC may change
// (combining marks, decomposable or composable characters) go through utf8proc.
std::string nfc(std::string_view s);

// NFC of the whole string by utf8proc (the reference nfc() is tested against).
std::string nfc_reference(std::string_view s);

// True when every code point of valid UTF-8 `s` has NFC_QC=Yes and combining class 0, so
// the text is NFC already (a table built once from utf8proc's data).
bool quick_nfc(std::string_view s);

}  // namespace tandem::tok
