#pragma once
// Request bodies as JSON, with the limits that keep one request from hurting the server:
// the nesting depth is checked on the raw bytes before the parser builds anything, so no
// code that walks the value later (copies, dumps, the chat template's tojson) can recurse
// deeper than kMaxJsonDepth; a NUL byte is refused (the parser would stop there and take
// `{}\0junk` for `{}`); parse errors say where and why but never echo the input or the
// library's own error codes. Error messages quote request values only through quote(),
// which keeps a short, printable prefix.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tandem::server {

// Arrays and objects nested deeper than this are refused with a 400.
inline constexpr int kMaxJsonDepth = 64;
// The most characters of a request value an error message quotes.
inline constexpr size_t kMaxQuoted = 40;

// Parses a request body; throws ApiError(400, param "") naming what is wrong.
nlohmann::ordered_json parse_json_body(std::string_view body);

// The deepest nesting of arrays and objects in `text`, read as JSON tokens (strings are
// skipped, so brackets inside them do not count). Stops counting once past `limit`.
int json_depth(std::string_view text, int limit = kMaxJsonDepth);

// A request value for an error message: at most kMaxQuoted characters (cut on a UTF-8
// boundary, "..." appended), control characters as \xNN, in single quotes.
std::string quote(std::string_view value);
// A JSON value for an error message: numbers, booleans and null as written (numbers cut
// like quote()), strings through quote(), arrays and objects by kind ("an array of 3").
std::string describe(const nlohmann::ordered_json& v);

}  // namespace tandem::server
