#pragma once
// The chat page's files, embedded in the binary at build time (web/build.mjs writes the
// source that defines these from web/src). Each file is held as sent and precompressed;
// names of hashed assets ("assets/main-XXXX.js") change with their content.
#include <span>
#include <string_view>

namespace tandem::server {

struct WebAsset {
  std::string_view name;          // "index.html", "assets/main-ABCD1234.js"
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view identity;      // the bytes themselves
  std::string_view gzip, br;      // precompressed; empty when compression does not pay
  std::string_view etag;          // a strong ETag ("\"<hex>\""), the content's hash
  bool immutable = false;         // hashed name: cacheable for a year
  bool first_load = false;        // part of the page's first load
};

std::span<const WebAsset> web_assets();
// False when the build had no web/node_modules: index.html is then a notice saying so.
bool web_page_built();

}  // namespace tandem::server
