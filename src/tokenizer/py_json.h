#pragma once
// JSON text exactly as Python's json.dumps(x, ensure_ascii=False) writes it, which is what
// the chat template's `tojson` filter produces (transformers' chat_template_utils):
// insertion key order, ", " and ": " separators, non-ASCII kept, floats as Python's repr
// ("1.0", "1e-07", "1e+16").
#include <string>

#include <nlohmann/json.hpp>

namespace tandem::tok {

std::string py_json_dumps(const nlohmann::ordered_json& v);

// Python's repr() of a float (shortest round-trip digits, Python's choice of notation).
std::string py_float_repr(double d);

}  // namespace tandem::tok
