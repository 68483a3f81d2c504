#include "structured/grammar.h"

#include "core/error.h"

namespace tandem::structured {

uint32_t GrammarBuilder::add_nonterminal(std::string name) {
  names_.push_back(std::move(name));
  return uint32_t(names_.size() - 1);
}

Symbol GrammarBuilder::lexeme(ExprId e, const std::string& name) {
  if (auto it = lexeme_of_.find(e); it != lexeme_of_.end()) return it->second;
  Symbol s = Symbol(lexemes_.size());
  lexemes_.push_back(e);
  lexeme_names_.push_back(name);
  lexeme_of_.emplace(e, s);
  return s;
}

void GrammarBuilder::add_rule(uint32_t lhs, std::vector<Symbol> rhs) {
  rules_.push_back({lhs, std::move(rhs)});
}

Symbol GrammarBuilder::optional(Symbol s) {
  if (auto it = opt_of_.find(s); it != opt_of_.end()) return it->second;
  uint32_t n = add_nonterminal("opt");
  add_rule(n, {});
  add_rule(n, {s});
  return opt_of_[s] = nt(n);
}

Symbol GrammarBuilder::star(Symbol s) {
  if (auto it = star_of_.find(s); it != star_of_.end()) return it->second;
  uint32_t n = add_nonterminal("star");
  add_rule(n, {});
  add_rule(n, {nt(n), s});  // left recursion: Earley keeps rows small this way
  return star_of_[s] = nt(n);
}

Symbol GrammarBuilder::plus(Symbol s) {
  if (auto it = plus_of_.find(s); it != plus_of_.end()) return it->second;
  uint32_t n = add_nonterminal("plus");
  add_rule(n, {s});
  add_rule(n, {nt(n), s});
  return plus_of_[s] = nt(n);
}

Symbol GrammarBuilder::choice(std::vector<std::vector<Symbol>> alternatives,
                              const std::string& name) {
  uint32_t n = add_nonterminal(name);
  for (auto& a : alternatives) add_rule(n, std::move(a));
  return nt(n);
}

Grammar GrammarBuilder::finish(uint32_t start, const std::string& what) {
  // A lexeme that matches the empty string cannot be lexed (nothing ends it): it becomes
  // a nonterminal for "empty, or the lexeme's non-empty texts".
  std::unordered_map<Symbol, Symbol> nullable_lexeme;
  size_t nlex = lexemes_.size();
  for (size_t l = 0; l < nlex; ++l) {
    if (!store_.nullable(lexemes_[l])) continue;
    ExprId nonempty = store_.concat(store_.bytes(~ByteSet{}), store_.any_bytes());
    ExprId e = store_.intersect(lexemes_[l], nonempty);
    uint32_t n = add_nonterminal(lexeme_names_[l].empty() ? "lexeme?" : lexeme_names_[l] + "?");
    add_rule(n, {});
    if (!store_.is_empty(e)) add_rule(n, {lexeme(e, lexeme_names_[l])});
    nullable_lexeme[Symbol(l)] = nt(n);
  }
  for (Rule& r : rules_)
    for (Symbol& s : r.rhs)
      if (!is_nonterminal(s))
        if (auto it = nullable_lexeme.find(s); it != nullable_lexeme.end()) s = it->second;

  const size_t nn = names_.size();
  std::vector<uint8_t> lex_ok(lexemes_.size());
  for (size_t l = 0; l < lexemes_.size(); ++l)
    lex_ok[l] = !store_.nullable(lexemes_[l]) && !store_.is_empty(lexemes_[l]);

  // Productive nonterminals (derive some text), to a fixpoint.
  std::vector<uint8_t> productive(nn, 0);
  auto sym_ok = [&](Symbol s) {
    return is_nonterminal(s) ? productive[s & ~kNonterminalBit] != 0 : lex_ok[s] != 0;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (const Rule& r : rules_) {
      if (productive[r.lhs]) continue;
      bool ok = true;
      for (Symbol s : r.rhs) ok = ok && sym_ok(s);
      if (ok) productive[r.lhs] = changed = true;
    }
  }
  if (!productive[start]) fail(ErrorKind::kInvalidArgument, "{} accepts no text at all", what);

  Grammar g;
  g.names = names_;
  g.names.push_back("start'");
  const uint32_t aug = uint32_t(nn);
  std::vector<Rule> kept;
  kept.push_back({aug, {nt(start)}});
  for (Rule& r : rules_) {
    bool ok = productive[r.lhs];
    for (Symbol s : r.rhs) ok = ok && sym_ok(s);
    if (ok) kept.push_back(std::move(r));
  }
  // Reachable from the start, so the parser's tables hold only what can be used.
  std::vector<std::vector<uint32_t>> by_lhs(nn + 1);
  for (uint32_t i = 0; i < kept.size(); ++i) by_lhs[kept[i].lhs].push_back(i);
  std::vector<uint8_t> reach(nn + 1, 0);
  std::vector<uint32_t> stack{aug};
  reach[aug] = 1;
  while (!stack.empty()) {
    uint32_t n = stack.back();
    stack.pop_back();
    for (uint32_t ri : by_lhs[n])
      for (Symbol s : kept[ri].rhs)
        if (is_nonterminal(s) && !reach[s & ~kNonterminalBit]) {
          reach[s & ~kNonterminalBit] = 1;
          stack.push_back(s & ~kNonterminalBit);
        }
  }
  g.rules_begin.assign(nn + 2, 0);
  std::vector<uint32_t> rule_ids;
  for (uint32_t n = 0; n <= nn; ++n) {
    g.rules_begin[n] = uint32_t(g.rules_of.size());
    if (!reach[n]) continue;
    for (uint32_t ri : by_lhs[n]) {
      uint32_t r = uint32_t(g.rule_lhs.size());
      g.rule_lhs.push_back(n);
      g.rule_start.push_back(uint32_t(g.flat.size()));
      for (Symbol s : kept[ri].rhs) g.flat.push_back(s);
      g.flat.push_back(kRuleEndBit | r);
      g.rules_of.push_back(r);
    }
  }
  g.rules_begin[nn + 1] = uint32_t(g.rules_of.size());
  // Nullable nonterminals, to a fixpoint.
  g.nullable.assign(nn + 1, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < g.rule_lhs.size(); ++r) {
      if (g.nullable[g.rule_lhs[r]]) continue;
      bool all = true;
      for (uint32_t i = g.rule_start[r]; !is_rule_end(g.flat[i]); ++i) {
        Symbol s = g.flat[i];
        all = all && is_nonterminal(s) && g.nullable[s & ~kNonterminalBit];
      }
      if (all) g.nullable[g.rule_lhs[r]] = changed = true;
    }
  }
  g.lexemes = lexemes_;
  g.lexeme_names = lexeme_names_;
  g.start = aug;
  return g;
}

}  // namespace tandem::structured
