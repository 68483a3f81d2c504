#pragma once
// A context-free grammar over lexemes: what every constraint compiles to.
//
// Terminals are lexemes, byte-level expressions matched greedily by the lexer (lexer.h);
// nonterminals have rules made of both. A JSON schema becomes one nonterminal per schema
// node with strings, numbers, keys and punctuation as lexemes; a regex or a choice is a
// single lexeme; a grammar file keeps its own rules.
//
// GrammarBuilder collects rules; finish() drops what can derive no text (rules through an
// empty lexeme or an unproductive nonterminal), refuses a grammar whose start derives
// nothing, and lays the rules out flat for the Earley parser (earley.h).
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "structured/expr.h"
#include "structured/lexer.h"

namespace tandem::structured {

// A symbol: a lexeme id, or a nonterminal with kNonterminalBit set.
using Symbol = uint32_t;
inline constexpr Symbol kNonterminalBit = 0x80000000u;
inline constexpr Symbol kRuleEndBit = 0x40000000u;  // in the flat layout: end of rule r
inline bool is_nonterminal(Symbol s) {
  return (s & kNonterminalBit) != 0;
}
inline bool is_rule_end(Symbol s) {
  return (s & kRuleEndBit) != 0 && !is_nonterminal(s);
}

struct Grammar {
  // Rule r's symbols are flat[rule_start[r] ...] up to the marker kRuleEndBit | r.
  std::vector<Symbol> flat;
  std::vector<uint32_t> rule_start;
  std::vector<uint32_t> rule_lhs;         // nonterminal index of rule r
  std::vector<uint32_t> rules_begin;      // nonterminal n's rules are
  std::vector<uint32_t> rules_of;         //   rules_of[rules_begin[n] .. rules_begin[n+1])
  std::vector<uint8_t> nullable;          // per nonterminal
  std::vector<std::string> names;         // per nonterminal, for messages
  std::vector<ExprId> lexemes;            // lexeme id -> expression
  std::vector<std::string> lexeme_names;  // lexeme id -> readable form
  uint32_t start = 0;                     // nonterminal
  size_t num_nonterminals() const { return names.size(); }
};

class GrammarBuilder {
 public:
  explicit GrammarBuilder(ExprStore& store) : store_(store) {}

  uint32_t add_nonterminal(std::string name);
  static Symbol nt(uint32_t index) { return kNonterminalBit | index; }
  // The lexeme for `e` (one per distinct expression).
  Symbol lexeme(ExprId e, const std::string& name = {});
  void add_rule(uint32_t lhs, std::vector<Symbol> rhs);
  size_t num_rules() const { return rules_.size(); }
  size_t num_nonterminals() const { return names_.size(); }
  const std::string& name(uint32_t nt) const { return names_[nt]; }

  // Helpers that add nonterminals: body? body* body+ and a choice of sequences.
  Symbol optional(Symbol s);
  Symbol star(Symbol s);
  Symbol plus(Symbol s);
  Symbol choice(std::vector<std::vector<Symbol>> alternatives, const std::string& name);

  // Throws Error(kInvalidArgument) when `start` derives no text; `what` names the input.
  Grammar finish(uint32_t start, const std::string& what);

 private:
  struct Rule {
    uint32_t lhs;
    std::vector<Symbol> rhs;
  };
  ExprStore& store_;
  std::vector<std::string> names_;
  std::vector<Rule> rules_;
  std::vector<ExprId> lexemes_;
  std::vector<std::string> lexeme_names_;
  std::unordered_map<ExprId, Symbol> lexeme_of_;
  std::unordered_map<Symbol, Symbol> star_of_, plus_of_, opt_of_;
};

}  // namespace tandem::structured
