// Schema nodes (schema_model.h) -> grammar rules and lexemes.
#include <fmt/format.h>

#include <map>

#include "core/error.h"
#include "structured/charset.h"
#include "structured/json_formats.h"
#include "structured/json_schema.h"
#include "structured/regex.h"
#include "structured/schema_reader.h"

namespace tandem::structured {

using namespace schema;

namespace {

constexpr size_t kMaxSchemaNodes = 200000;  // grammar nonterminals a schema may produce
constexpr uint64_t kMaxUnrolled = 20000;    // counted positions (minItems, maxProperties ...)
constexpr size_t kMaxAnyOfCombinations = 1024;

class SchemaGrammar {
 public:
  SchemaGrammar(ExprStore& st, Reader& rd, const JsonSchemaOptions& opt)
      : st_(st), gb_(st), rd_(rd) {
    ExprId wsc = st_.bytes(ByteSet::single(' ') | ByteSet::single('\t') | ByteSet::single('\n') |
                           ByteSet::single('\r'));
    ws_ = st_.repeat(wsc, 0, uint32_t(std::max(0, opt.max_whitespace)));
    json_char_ = char_expr(st_, CharSet::all(), TextEncoding::kJsonString);
    any_body_ = st_.star(json_char_);
    comma_ = punct(',');
    lbrace_ = punct('{');
    rbrace_ = punct('}');
    lbracket_ = punct('[');
    rbracket_ = punct(']');
  }

  GrammarBuilder& builder() { return gb_; }

  Symbol value(SchemaP s) {
    s = rd_.deref(s);
    if (auto it = memo_.find(s); it != memo_.end()) return it->second;
    if (memo_.size() > kMaxSchemaNodes)
      unsupported("(schema)", s->pointer, "the schema expands to too large a grammar");
    uint32_t n = gb_.add_nonterminal(s->pointer.empty() ? "#" : s->pointer);
    Symbol sym = GrammarBuilder::nt(n);
    memo_[s] = sym;
    if (s->never) return sym;  // no rules: nothing matches
    if (s->is_any()) {
      gb_.add_rule(n, {any_value()});
      return sym;
    }
    if (s->has_enum) {  // the values decide, whatever else the schema says
      enum_rules(n, s);
      return sym;
    }
    if (!s->deferred.empty()) {
      gb_.add_rule(n, {value(rd_.lower(s))});
      return sym;
    }
    if (!s->any_of.empty()) {
      expand_any_of(n, s);
      return sym;
    }
    typed_rules(n, s);
    return sym;
  }

 private:
  Symbol lex(ExprId e, const std::string& name) { return gb_.lexeme(st_.concat(ws_, e), name); }
  Symbol punct(char c) { return lex(st_.byte(uint8_t(c)), std::string(1, c)); }

  ExprId key_expr(ExprId body) {
    ExprId parts[5] = {st_.byte('"'), body, st_.byte('"'), ws_, st_.byte(':')};
    return st_.concat(parts);
  }
  // A string's content as written in JSON: canonical escapes, and `/` also as \/.
  ExprId json_text(const std::string& text) {
    std::string esc = json_escape(text);
    if (esc.find('/') == std::string::npos) return st_.literal(esc);
    std::vector<ExprId> parts;
    size_t start = 0;
    for (size_t i = 0; i <= esc.size(); ++i) {
      if (i < esc.size() && esc[i] != '/') continue;
      parts.push_back(st_.literal(esc.substr(start, i - start)));
      if (i < esc.size()) parts.push_back(st_.alt(st_.byte('/'), st_.literal("\\/")));
      start = i + 1;
    }
    return st_.concat(parts);
  }
  Symbol key_lexeme(const std::string& name) {
    return lex(key_expr(json_text(name)), fmt::format("\"{}\":", name));
  }

  void expand_any_of(uint32_t n, SchemaP s) {
    SchemaP base = rd_.without_any_of(s);
    const auto& groups = s->any_of;
    size_t combos = 1;
    for (const auto& g : groups) {
      combos *= g.size();
      if (combos > kMaxAnyOfCombinations)
        unsupported("anyOf", s->pointer, "too many combinations of anyOf/oneOf branches");
    }
    std::vector<size_t> idx(groups.size(), 0);
    for (size_t c = 0; c < combos; ++c) {
      SchemaP m = base;
      for (size_t g = 0; g < groups.size(); ++g) m = rd_.merge(m, groups[g][idx[g]]);
      gb_.add_rule(n, {value(m)});
      for (size_t g = groups.size(); g-- > 0;) {
        if (++idx[g] < groups[g].size()) break;
        idx[g] = 0;
      }
    }
  }

  // Scalars of an enum become one lexeme; objects and arrays get rules of their own.
  void enum_rules(uint32_t n, SchemaP s) {
    SchemaP base = rd_.without_enum(s);
    std::vector<ExprId> scalars;
    for (const Json& v : s->enum_values) {
      if (!rd_.validate(base, v)) continue;
      if (v.is_object() || v.is_array())
        gb_.add_rule(n, {const_value(v)});
      else
        scalars.push_back(scalar_literal(v, (base->types & kFraction) == 0));
    }
    if (!scalars.empty()) gb_.add_rule(n, {lex(st_.alt(scalars), "enum")});
  }

  ExprId scalar_literal(const Json& v, bool integer) {
    if (v.is_null()) return st_.literal("null");
    if (v.is_boolean()) return st_.literal(v.get<bool>() ? "true" : "false");
    if (v.is_string()) {
      ExprId parts[3] = {st_.byte('"'), json_text(v.get<std::string>()), st_.byte('"')};
      return st_.concat(parts);
    }
    std::string text = v.is_number_float() ? fmt::format("{}", v.get<double>()) : v.dump();
    auto d = Decimal::parse(text);
    if (!d) unsupported("enum", "", "a number this large");
    NumberRange r;
    r.min = r.max = *d;
    r.integer = integer && d->is_integer();
    return number_expr(st_, r);
  }

  Symbol const_value(const Json& v) {
    uint32_t n = gb_.add_nonterminal("const");
    if (v.is_object()) {
      std::vector<Symbol> rhs{lbrace_};
      bool first = true;
      for (auto& [k, x] : v.items()) {
        if (!first) rhs.push_back(comma_);
        first = false;
        rhs.push_back(key_lexeme(k));
        rhs.push_back(const_value(x));
      }
      rhs.push_back(rbrace_);
      gb_.add_rule(n, std::move(rhs));
    } else if (v.is_array()) {
      std::vector<Symbol> rhs{lbracket_};
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) rhs.push_back(comma_);
        rhs.push_back(const_value(v[i]));
      }
      rhs.push_back(rbracket_);
      gb_.add_rule(n, std::move(rhs));
    } else {
      gb_.add_rule(n, {lex(scalar_literal(v, false), "const")});
    }
    return GrammarBuilder::nt(n);
  }

  bool excluded(SchemaP s, const Json& v) {
    for (const Json& x : s->excluded)
      if (json_equal(x, v)) return true;
    return false;
  }
  // The expression minus the excluded values of the given type (scalar_literal forms).
  ExprId minus_excluded(SchemaP s, ExprId e, uint8_t type, bool integer) {
    std::vector<ExprId> out;
    for (const Json& x : s->excluded)
      if (type_of(x) & type) out.push_back(scalar_literal(x, integer));
    if (out.empty()) return e;
    return st_.intersect(e, st_.complement(st_.alt(out)));
  }

  void typed_rules(uint32_t n, SchemaP s) {
    uint8_t t = s->types;
    if ((t & kNull) && !excluded(s, Json(nullptr)))
      gb_.add_rule(n, {lex(st_.literal("null"), "null")});
    if (t & kBoolean) {
      std::vector<ExprId> b;
      if (!excluded(s, Json(true))) b.push_back(st_.literal("true"));
      if (!excluded(s, Json(false))) b.push_back(st_.literal("false"));
      if (!b.empty()) gb_.add_rule(n, {lex(st_.alt(b), "boolean")});
    }
    if (t & (kInteger | kFraction)) gb_.add_rule(n, {number(s)});
    if (t & kString) gb_.add_rule(n, {string_lexeme(s)});
    if (t & kArray) gb_.add_rule(n, {array(s)});
    if (t & kObject) gb_.add_rule(n, {object(s)});
  }

  Symbol number(SchemaP s) {
    NumberRange r = s->num;
    r.integer = (s->types & kFraction) == 0;
    for (const std::string& f : s->formats) {
      FormatKind k = classify_format(f);
      if (k == FormatKind::kInt32 || k == FormatKind::kInt64) {
        r.integer = true;
        const char* lo = k == FormatKind::kInt32 ? "-2147483648" : "-9223372036854775808";
        const char* hi = k == FormatKind::kInt32 ? "2147483647" : "9223372036854775807";
        Decimal l = *Decimal::parse(lo), h = *Decimal::parse(hi);
        if (!r.min || compare(l, *r.min) > 0) r.min = l, r.min_exclusive = false;
        if (!r.max || compare(h, *r.max) < 0) r.max = h, r.max_exclusive = false;
      }
    }
    std::vector<ExprId> parts;
    for (const Decimal& m : s->multiple_of) {
      if (m.int_digits == "1" && m.frac_digits.empty()) {
        r.integer = true;
        continue;
      }
      parts.push_back(multiple_of(m, r.integer, s->pointer));
    }
    ExprId e = number_expr(st_, r);
    if (!parts.empty()) {
      parts.push_back(e);
      e = st_.intersect(parts);
    }
    e = minus_excluded(s, e, kInteger | kFraction, false);
    return lex(e, r.integer ? "integer" : "number");
  }

  // Numbers that are multiples of m, for m = a power of ten, or an integer whose only prime
  // factors are 2 and 5 (then the last digits decide). Other divisors are refused.
  ExprId multiple_of(const Decimal& m, bool integer, const std::string& pointer) {
    ExprId dig = st_.bytes(ByteSet::range('0', '9'));
    ExprId sign = st_.optional(st_.byte('-'));
    if (!m.frac_digits.empty() && m.int_digits == "0" &&
        m.frac_digits.find_first_not_of('0') == m.frac_digits.size() - 1 &&
        m.frac_digits.back() == '1') {
      // 10^-k: at most k fraction digits, then only zeros.
      uint32_t k = uint32_t(m.frac_digits.size());
      ExprId frac =
          st_.concat(st_.byte('.'), st_.concat(st_.repeat(dig, 0, k), st_.star(st_.byte('0'))));
      ExprId parts[3] = {sign, st_.plus(dig), st_.optional(frac)};
      return st_.concat(parts);
    }
    if (!m.frac_digits.empty() || m.int_digits.size() > 6)
      unsupported("multipleOf", pointer, fmt::format("a divisor like {}", m.str()));
    uint64_t d = std::stoull(m.int_digits);
    uint64_t rest = d;
    int twos = 0, fives = 0;
    while (rest % 2 == 0) rest /= 2, ++twos;
    while (rest % 5 == 0) rest /= 5, ++fives;
    int j = std::max(twos, fives);
    if (rest != 1 || j > 3)
      unsupported("multipleOf", pointer, fmt::format("a divisor like {}", m.str()));
    // The number (an integer, maybe with a zero fraction) ends in j digits divisible by d.
    uint64_t p = 1;
    for (int i = 0; i < j; ++i) p *= 10;
    std::vector<ExprId> tails;
    for (uint64_t v = 0; v < p; v += d) {
      std::string t = fmt::format("{:0{}}", v, j);
      tails.push_back(st_.literal(t));
      // Short numbers: the whole number is v (without the leading zeros).
      tails.push_back(st_.literal(std::to_string(v)));
    }
    ExprId zfrac =
        integer ? kEpsilon : st_.optional(st_.concat(st_.byte('.'), st_.plus(st_.byte('0'))));
    ExprId parts[4] = {sign, st_.star(dig), st_.alt(tails), zfrac};
    return st_.concat(parts);
  }

  // The text between the quotes of a string matching s's string keywords.
  ExprId string_body(SchemaP s) {
    std::vector<ExprId> parts;
    if (s->min_length > 0 || s->max_length != kNoLimit) {
      if (s->min_length > kMaxUnrolled * 50)
        unsupported("minLength", s->pointer, "a length this large");
      uint32_t lo = uint32_t(s->min_length);
      uint32_t hi = s->max_length > 0xFFFFFFF0u ? kUnbounded : uint32_t(s->max_length);
      if (hi != kUnbounded && hi < lo) return kNothing;
      parts.push_back(st_.repeat(json_char_, lo, hi));
    }
    RegexOptions ro;
    ro.encoding = TextEncoding::kJsonString;
    for (const Pattern& p : s->patterns) {
      ro.match = RegexMatch::kSearch;
      try {
        parts.push_back(compile_regex(st_, p.source, ro));
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::kUnsupported) unsupported("pattern", p.pointer, e.what());
        invalid("pattern", p.pointer, e.what());
      }
    }
    for (const std::string& f : s->formats) {
      if (classify_format(f) != FormatKind::kRegex) continue;
      ro.match = RegexMatch::kFull;
      parts.push_back(compile_regex(st_, format_regex(f), ro));
    }
    if (parts.empty()) return any_body_;
    return st_.intersect(parts);
  }

  Symbol string_lexeme(SchemaP s) {
    ExprId parts[3] = {st_.byte('"'), string_body(s), st_.byte('"')};
    return lex(minus_excluded(s, st_.concat(parts), kString, false), "string");
  }

  Symbol array(SchemaP s) {
    const uint64_t k = s->prefix_items.size();
    const uint64_t lo = s->min_items, hi = s->max_items;
    uint64_t cap = hi != kNoLimit ? hi : std::max<uint64_t>({k, lo, 1});
    if (cap > kMaxUnrolled)
      unsupported(hi != kNoLimit ? "maxItems" : "minItems", s->pointer, "a count this large");
    SchemaP items = s->items ? s->items : rd_.any();
    std::map<uint64_t, uint32_t> at;  // A(j): the rest of the array after j items
    std::vector<uint64_t> todo;
    auto get = [&](uint64_t j) {
      j = std::min(j, cap);
      auto [it, fresh] = at.emplace(j, 0);
      if (fresh) {
        it->second = gb_.add_nonterminal(fmt::format("{}[{}..]", s->pointer, j));
        todo.push_back(j);
      }
      return GrammarBuilder::nt(it->second);
    };
    Symbol first = get(0);
    while (!todo.empty()) {
      uint64_t j = todo.back();
      todo.pop_back();
      uint32_t n = at[j];
      if (j >= lo) gb_.add_rule(n, {});
      if (j < hi) {
        SchemaP e = j < k ? s->prefix_items[j] : items;
        std::vector<Symbol> rhs;
        if (j > 0) rhs.push_back(comma_);
        rhs.push_back(value(e));
        rhs.push_back(get(j + 1));
        gb_.add_rule(n, std::move(rhs));
      }
    }
    uint32_t arr = gb_.add_nonterminal(s->pointer + "[]");
    gb_.add_rule(arr, {lbracket_, first, rbracket_});
    return GrammarBuilder::nt(arr);
  }

  // Keys allowed by propertyNames, as a string body (or the any-body when unconstrained).
  ExprId names_body(SchemaP s) {
    if (!s->property_names) return any_body_;
    SchemaP pn = rd_.deref(s->property_names);
    if (pn->is_any()) return any_body_;
    if (pn->never || !(pn->types & kString)) return kNothing;
    if (!pn->any_of.empty())
      unsupported("propertyNames", s->pointer, "anyOf/oneOf inside propertyNames");
    if (pn->has_enum) {
      std::vector<ExprId> names;
      for (const Json& v : pn->enum_values)
        if (v.is_string() && rd_.validate(rd_.without_enum(pn), v))
          names.push_back(json_text(v.get<std::string>()));
      return st_.alt(names);
    }
    return string_body(pn);
  }

  Symbol object(SchemaP s) {
    struct Member {
      std::string name;
      SchemaP schema;
      bool required;
    };
    std::vector<Member> members;
    auto is_required = [&](const std::string& name) {
      return std::find(s->required.begin(), s->required.end(), name) != s->required.end();
    };
    auto listed = [&](const std::string& name) {
      for (const Member& m : members)
        if (m.name == name) return true;
      return false;
    };
    auto forbidden = [&](const std::string& name) {
      return std::find(s->forbidden.begin(), s->forbidden.end(), name) != s->forbidden.end();
    };
    for (auto& [name, ps] : s->properties)
      if (!listed(name)) members.push_back({name, rd_.schema_for_key(s, name), is_required(name)});
    for (const std::string& name : s->required)
      if (!listed(name)) members.push_back({name, rd_.schema_for_key(s, name), true});
    for (Member& m : members)
      if (forbidden(m.name)) m.schema = rd_.never();  // a required one makes the object impossible
    if (s->property_names) {
      std::vector<Member> kept;
      for (Member& m : members) {
        if (rd_.validate(s->property_names, Json(m.name))) {
          kept.push_back(m);
        } else if (m.required) {
          kept.push_back({m.name, rd_.never(), true});  // the object cannot exist
        }
      }
      members = std::move(kept);
    }
    // Other members: one kind per patternProperty, and one for additionalProperties.
    struct Extra {
      ExprId key;
      SchemaP schema;
    };
    std::vector<Extra> extras;
    std::vector<ExprId> known;
    for (const Member& m : members) known.push_back(json_text(m.name));
    for (auto& [name, ps] : s->properties) known.push_back(json_text(name));
    for (const std::string& name : s->forbidden) known.push_back(json_text(name));
    ExprId not_known = known.empty() ? st_.any_bytes() : st_.complement(st_.alt(known));
    ExprId names = names_body(s);
    if (names == any_body_) names = st_.any_bytes();
    RegexOptions ro;
    ro.encoding = TextEncoding::kJsonString;
    ro.match = RegexMatch::kSearch;
    std::vector<ExprId> pattern_keys;
    for (auto& [p, ps] : s->pattern_properties) {
      ExprId pk;
      try {
        pk = compile_regex(st_, p.source, ro);
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::kUnsupported)
          unsupported("patternProperties", p.pointer, e.what());
        invalid("patternProperties", p.pointer, e.what());
      }
      for (size_t i = 0; i < pattern_keys.size(); ++i) {
        if (rd_.deref(s->pattern_properties[i].second) == rd_.deref(ps)) continue;
        if (!st_.is_empty(st_.intersect(pattern_keys[i], pk), 20000))
          unsupported("patternProperties", p.pointer,
                      fmt::format("it overlaps with the pattern '{}', and a key matching both "
                                  "would need both schemas",
                                  s->pattern_properties[i].first.source));
      }
      pattern_keys.push_back(pk);
      // Listed names the pattern cannot match need no exclusion.
      std::vector<ExprId> hidden;
      auto hide = [&](const std::string& name) {
        if (st_.matches(pk, json_escape(name))) hidden.push_back(json_text(name));
      };
      for (const Member& m : members) hide(m.name);
      for (auto& [name, ps2] : s->properties) hide(name);
      for (const std::string& name : s->forbidden) hide(name);
      ExprId parts[3] = {pk, hidden.empty() ? st_.any_bytes() : st_.complement(st_.alt(hidden)),
                         names};
      extras.push_back({st_.intersect(parts), ps});
    }
    SchemaP add = s->additional ? rd_.deref(s->additional) : rd_.any();
    if (!add->never) {
      std::vector<ExprId> parts{any_body_, not_known, names};
      for (ExprId pk : pattern_keys) parts.push_back(st_.complement(pk));
      extras.push_back({st_.intersect(parts), add});
    }
    uint32_t xkv = 0;
    if (!extras.empty()) {
      xkv = gb_.add_nonterminal(s->pointer + "{*}");
      for (const Extra& x : extras)
        gb_.add_rule(xkv, {lex(key_expr(x.key), "key"), value(x.schema)});
    }

    const uint64_t lo = s->min_properties, hi = s->max_properties;
    const uint64_t cap = std::max<uint64_t>({1, lo, hi != kNoLimit ? hi : 0});
    const uint64_t n = members.size();
    if ((n + 1) * (cap + 1) > kMaxUnrolled)
      unsupported(hi != kNoLimit ? "maxProperties" : "minProperties", s->pointer,
                  "too many counted members");
    // P(i, c): members i.. still to come, c emitted so far (capped at cap).
    std::map<std::pair<uint64_t, uint64_t>, uint32_t> at;
    std::vector<std::pair<uint64_t, uint64_t>> todo;
    auto get = [&](uint64_t i, uint64_t c) {
      c = std::min(c, cap);
      auto [it, fresh] = at.emplace(std::make_pair(i, c), 0);
      if (fresh) {
        it->second = gb_.add_nonterminal(fmt::format("{}{{{},{}}}", s->pointer, i, c));
        todo.push_back({i, c});
      }
      return GrammarBuilder::nt(it->second);
    };
    Symbol first = get(0, 0);
    while (!todo.empty()) {
      auto [i, c] = todo.back();
      todo.pop_back();
      uint32_t nt = at[{i, c}];
      if (i < n) {
        const Member& m = members[i];
        if (c < hi) {
          std::vector<Symbol> rhs;
          if (c > 0) rhs.push_back(comma_);
          rhs.push_back(key_lexeme(m.name));
          rhs.push_back(value(m.schema));
          rhs.push_back(get(i + 1, c + 1));
          gb_.add_rule(nt, std::move(rhs));
        }
        if (!m.required) gb_.add_rule(nt, {get(i + 1, c)});
      } else {
        if (c >= lo) gb_.add_rule(nt, {});
        if (xkv && c < hi) {
          std::vector<Symbol> rhs;
          if (c > 0) rhs.push_back(comma_);
          rhs.push_back(GrammarBuilder::nt(xkv));
          rhs.push_back(get(n, c + 1));
          gb_.add_rule(nt, std::move(rhs));
        }
      }
    }
    uint32_t obj = gb_.add_nonterminal(s->pointer + "{}");
    gb_.add_rule(obj, {lbrace_, first, rbrace_});
    return GrammarBuilder::nt(obj);
  }

  // Any JSON value.
  Symbol any_value() {
    if (have_any_) return any_;
    uint32_t v = gb_.add_nonterminal("value");
    any_ = GrammarBuilder::nt(v);
    have_any_ = true;
    NumberRange unbounded;
    gb_.add_rule(v, {lex(st_.literal("null"), "null")});
    gb_.add_rule(v, {lex(st_.alt(st_.literal("true"), st_.literal("false")), "boolean")});
    gb_.add_rule(v, {lex(number_expr(st_, unbounded), "number")});
    ExprId str[3] = {st_.byte('"'), any_body_, st_.byte('"')};
    gb_.add_rule(v, {lex(st_.concat(str), "string")});
    uint32_t members = gb_.add_nonterminal("members");
    Symbol kv_key = lex(key_expr(any_body_), "key");
    gb_.add_rule(members, {kv_key, any_});
    gb_.add_rule(members, {GrammarBuilder::nt(members), comma_, kv_key, any_});
    gb_.add_rule(v, {lbrace_, rbrace_});
    gb_.add_rule(v, {lbrace_, GrammarBuilder::nt(members), rbrace_});
    uint32_t elems = gb_.add_nonterminal("elements");
    gb_.add_rule(elems, {any_});
    gb_.add_rule(elems, {GrammarBuilder::nt(elems), comma_, any_});
    gb_.add_rule(v, {lbracket_, rbracket_});
    gb_.add_rule(v, {lbracket_, GrammarBuilder::nt(elems), rbracket_});
    return any_;
  }

  ExprStore& st_;
  GrammarBuilder gb_;
  Reader& rd_;
  ExprId ws_, json_char_, any_body_;
  Symbol comma_, lbrace_, rbrace_, lbracket_, rbracket_;
  Symbol any_ = 0;
  bool have_any_ = false;
  std::map<SchemaP, Symbol> memo_;
};

}  // namespace

std::shared_ptr<const CompiledGrammar> compile_json_schema(const std::string& text,
                                                           const JsonSchemaOptions& opt) {
  Json root;
  try {
    root = Json::parse(text);
  } catch (const std::exception& e) {
    fail(ErrorKind::kInvalidArgument, "json schema: not valid JSON: {}", e.what());
  }
  Reader rd(root);
  auto store = std::make_unique<ExprStore>();
  SchemaGrammar sg(*store, rd, opt);
  Symbol start = sg.value(rd.root());
  GrammarBuilder& gb = sg.builder();
  uint32_t top = gb.add_nonterminal("json");
  std::vector<Symbol> rhs;
  if (!opt.prefix.empty()) rhs.push_back(gb.lexeme(store->literal(opt.prefix), opt.prefix));
  rhs.push_back(start);
  if (!opt.suffix.empty()) rhs.push_back(gb.lexeme(store->literal(opt.suffix), opt.suffix));
  gb.add_rule(top, std::move(rhs));
  Grammar g = gb.finish(top, "the JSON schema");
  return std::make_shared<CompiledGrammar>(std::move(store), std::move(g));
}

}  // namespace tandem::structured
