#include "server/http_message.h"

#include "server/byte_stream.h"
#include "server/formatter.h"
#include "server/generation.h"

namespace tandem::server {

std::string lower_ascii(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return out;
}

std::string_view Headers::get(std::string_view name) const {
  for (auto& [k, v] : items)
    if (k == name) return v;
  return {};
}

bool Headers::has(std::string_view name) const {
  for (auto& kv : items)
    if (kv.first == name) return true;
  return false;
}

void Headers::add(std::string_view name, std::string value) {
  items.emplace_back(lower_ascii(name), std::move(value));
}

void Headers::set(std::string_view name, std::string value) {
  std::string key = lower_ascii(name);
  std::erase_if(items, [&](auto& kv) { return kv.first == key; });
  items.emplace_back(std::move(key), std::move(value));
}

std::string_view HttpRequest::path() const {
  std::string_view t = target;
  return t.substr(0, t.find('?'));
}

std::string_view HttpRequest::query() const {
  std::string_view t = target;
  size_t q = t.find('?');
  return q == std::string_view::npos ? std::string_view{} : t.substr(q + 1);
}

HttpResponse::HttpResponse() = default;
HttpResponse::HttpResponse(HttpResponse&&) noexcept = default;
HttpResponse& HttpResponse::operator=(HttpResponse&&) noexcept = default;
HttpResponse::~HttpResponse() = default;

}  // namespace tandem::server
