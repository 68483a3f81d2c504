#include "store/model_store_name.h"

#include <cctype>

#include "core/error.h"

namespace tandem::store {
namespace {

bool alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}
bool name_char(char c) {
  return alnum(c) || c == '.' || c == '_' || c == '-';
}

// "" when fine, else why not.
std::string check(std::string_view name, std::string_view tag) {
  if (name.empty()) return "the name is empty";
  if (name.size() > 200) return "the name is longer than 200 characters";
  size_t start = 0;
  for (;;) {
    size_t slash = name.find('/', start);
    std::string_view part = name.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part.empty()) return "a part of the name between '/' is empty";
    if (!alnum(part[0])) return "each part of the name starts with a letter or digit";
    for (char c : part)
      if (!name_char(c))
        return std::string("'") + c + "' is not allowed in a name (letters, digits, . _ - and /)";
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (tag.empty()) return "the tag after ':' is empty";
  if (tag.size() > 128) return "the tag is longer than 128 characters";
  if (!alnum(tag[0]) && tag[0] != '_') return "the tag starts with a letter, digit or _";
  for (char c : tag)
    if (!name_char(c))
      return std::string("'") + c + "' is not allowed in a tag (letters, digits, . _ -)";
  return "";
}

}  // namespace

std::string ModelName::key() const {
  std::string k = str();
  for (auto& c : k) c = char(std::tolower(static_cast<unsigned char>(c)));
  return k;
}

std::optional<ModelName> try_parse_model_name(std::string_view s) {
  ModelName n;
  size_t colon = s.rfind(':');
  if (colon != std::string_view::npos && s.find('/', colon) == std::string_view::npos) {
    n.name = std::string(s.substr(0, colon));
    n.tag = std::string(s.substr(colon + 1));
  } else {
    n.name = std::string(s);
  }
  if (!check(n.name, n.tag).empty()) return std::nullopt;
  return n;
}

ModelName parse_model_name(std::string_view s) {
  if (auto n = try_parse_model_name(s)) return *n;
  size_t colon = s.rfind(':');
  std::string_view name = s, tag = "latest";
  if (colon != std::string_view::npos && s.find('/', colon) == std::string_view::npos) {
    name = s.substr(0, colon);
    tag = s.substr(colon + 1);
  }
  fail(ErrorKind::kInvalidArgument, "'{}' is not a valid model name: {}", s, check(name, tag));
}

}  // namespace tandem::store
