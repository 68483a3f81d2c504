#include "structured/constraint.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/sha256.h"
#include "structured/json_schema.h"
#include "structured/lark.h"
#include "structured/regex.h"

namespace tandem::structured {

const char* to_string(ConstraintKind k) {
  switch (k) {
    case ConstraintKind::kJsonSchema:
      return "json_schema";
    case ConstraintKind::kJsonObject:
      return "json_object";
    case ConstraintKind::kRegex:
      return "regex";
    case ConstraintKind::kChoice:
      return "choice";
    case ConstraintKind::kGrammar:
      return "grammar";
  }
  return "?";
}

std::string ConstraintSpec::cache_key() const {
  std::string k = fmt::format("{}|{}|{}|{}|{}|", to_string(kind), max_whitespace, prefix.size(),
                              suffix.size(), choices.size());
  k += prefix;
  k += suffix;
  for (const std::string& c : choices) k += std::to_string(c.size()) + ":" + c;
  k += text;
  return sha256_hex(k);
}

namespace {

std::shared_ptr<const CompiledGrammar> single_lexeme(ExprId (*build)(ExprStore&,
                                                                     const ConstraintSpec&),
                                                     const ConstraintSpec& spec, const char* what) {
  auto store = std::make_unique<ExprStore>();
  ExprId body = build(*store, spec);
  std::vector<ExprId> parts{store->literal(spec.prefix), body, store->literal(spec.suffix)};
  ExprId all = store->concat(parts);
  GrammarBuilder gb(*store);
  uint32_t start = gb.add_nonterminal(what);
  gb.add_rule(start, {gb.lexeme(all, what)});
  Grammar g = gb.finish(start, what);
  return std::make_shared<CompiledGrammar>(std::move(store), std::move(g));
}

}  // namespace

std::shared_ptr<const CompiledGrammar> compile(const ConstraintSpec& spec) {
  switch (spec.kind) {
    case ConstraintKind::kJsonSchema:
    case ConstraintKind::kJsonObject: {
      JsonSchemaOptions o;
      o.max_whitespace = spec.max_whitespace;
      o.prefix = spec.prefix;
      o.suffix = spec.suffix;
      return compile_json_schema(spec.kind == ConstraintKind::kJsonObject
                                     ? std::string(R"({"type":"object"})")
                                     : spec.text,
                                 o);
    }
    case ConstraintKind::kRegex:
      return single_lexeme(
          [](ExprStore& st, const ConstraintSpec& s) {
            RegexOptions o;
            o.match = RegexMatch::kFull;
            return compile_regex(st, s.text, o);
          },
          spec, "the regex");
    case ConstraintKind::kChoice:
      if (spec.choices.empty()) fail(ErrorKind::kInvalidArgument, "choice: no choices given");
      return single_lexeme(
          [](ExprStore& st, const ConstraintSpec& s) {
            std::vector<ExprId> alts;
            for (const std::string& c : s.choices) alts.push_back(st.literal(c));
            return st.alt(alts);
          },
          spec, "the choice");
    case ConstraintKind::kGrammar:
      return compile_lark(spec.text, spec.prefix, spec.suffix);
  }
  fail(ErrorKind::kInternal, "unknown constraint kind");
}

std::shared_ptr<const CompiledGrammar> ConstraintCache::get(const ConstraintSpec& spec) {
  std::string key = spec.cache_key();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      if (it->second.error_kind >= 0)
        throw Error(ErrorKind(it->second.error_kind), it->second.error);
      return it->second.grammar;
    }
    ++misses_;
  }
  // Compile outside the lock: other requests keep their hits meanwhile. Two requests with
  // the same new spec may both compile it; the second result is dropped.
  Entry e;
  try {
    e.grammar = compile(spec);
  } catch (const Error& err) {
    if (err.kind() != ErrorKind::kInvalidArgument && err.kind() != ErrorKind::kUnsupported) throw;
    e.error_kind = int(err.kind());
    e.error = err.what();
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    lru_.push_front(key);
    e.lru = lru_.begin();
    it = entries_.emplace(key, std::move(e)).first;
    while (entries_.size() > capacity_) {
      entries_.erase(lru_.back());
      lru_.pop_back();
    }
  }
  if (it->second.error_kind >= 0) throw Error(ErrorKind(it->second.error_kind), it->second.error);
  return it->second.grammar;
}

size_t ConstraintCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}
uint64_t ConstraintCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}
uint64_t ConstraintCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

ConstraintCache& ConstraintCache::shared() {
  static ConstraintCache c;
  return c;
}

}  // namespace tandem::structured
