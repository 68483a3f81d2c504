#pragma once
// Structured outputs: what this module offers.
//
//   ConstraintSpec  what a request asks for (a JSON schema, any JSON object, a regex, a
//                   choice among strings, or a grammar in Lark-style EBNF, grammar.md);
//   compile()       turns it into a CompiledGrammar, or refuses it with an Error whose
//                   message names what it cannot honour (an API answers 400 with it);
//   ConstraintCache compiled grammars by spec, shared by every request that asks the same;
//   Vocabulary      a tokenizer's tokens, organised for masks (vocabulary.h);
//   Matcher         one output's state: the mask of allowed tokens, then the token taken
//                   (matcher.h).
//
// The engine keeps one Matcher per constrained sequence and applies its mask before
// sampling; nothing here depends on the engine or the server.
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/matcher.h"
#include "structured/vocabulary.h"

namespace tandem::structured {

enum class ConstraintKind { kJsonSchema, kJsonObject, kRegex, kChoice, kGrammar };
const char* to_string(ConstraintKind k);

struct ConstraintSpec {
  ConstraintKind kind = ConstraintKind::kJsonObject;
  std::string text;                  // the schema (JSON text), regex or grammar
  std::vector<std::string> choices;  // kChoice
  int max_whitespace = 20;           // JSON: whitespace bytes allowed between tokens
  // Literal text around the constrained part (a tool call's <tool_call> markers).
  std::string prefix, suffix;

  std::string cache_key() const;
};

// Throws Error(kInvalidArgument or kUnsupported) for a spec it cannot honour exactly.
std::shared_ptr<const CompiledGrammar> compile(const ConstraintSpec& spec);

// What a request hands the engine: the compiled constraint, the vocabulary of the model
// serving it, and optionally a token before which the output is free (`</think>` when the
// model thinks first: the constraint starts after it).
struct TokenConstraint {
  std::shared_ptr<const CompiledGrammar> grammar;
  std::shared_ptr<const Vocabulary> vocab;
  int32_t start_after = -1;  // a token id, or -1: constrained from the first token
};

class ConstraintCache {
 public:
  explicit ConstraintCache(size_t capacity = 512) : capacity_(capacity) {}
  // The compiled grammar of `spec`, compiled on a miss. A refusal is remembered too and
  // thrown again (as the same Error) for the same spec.
  std::shared_ptr<const CompiledGrammar> get(const ConstraintSpec& spec);
  size_t size() const;
  uint64_t hits() const;
  uint64_t misses() const;
  static ConstraintCache& shared();  // one per process

 private:
  struct Entry {
    std::shared_ptr<const CompiledGrammar> grammar;
    int error_kind = -1;  // >= 0: the refusal's ErrorKind, with error text
    std::string error;
    std::list<std::string>::iterator lru;
  };
  mutable std::mutex mu_;
  size_t capacity_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> lru_;  // most recent first
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace tandem::structured
