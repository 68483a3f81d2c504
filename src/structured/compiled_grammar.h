#pragma once
// A grammar ready for matching: its expressions, its rules, and the lexer built from them.
// Immutable to its users; the lexer grows behind a mutex, so one CompiledGrammar serves
// every sequence that uses the same constraint, on any thread.
#include <memory>
#include <mutex>
#include <string>

#include "structured/expr.h"
#include "structured/grammar.h"
#include "structured/lexer.h"

namespace tandem::structured {

// A lexer beyond this many states (each a transition row) is refused as too complex.
inline constexpr size_t kMaxLexerStates = 200000;

class CompiledGrammar {
 public:
  CompiledGrammar(std::unique_ptr<ExprStore> store, Grammar g, size_t max_states = kMaxLexerStates)
      : store_(std::move(store)), g_(std::move(g)) {
    lexer_ = std::make_unique<Lexer>(*store_, mu_, g_.lexemes, max_states);
  }
  const Grammar& grammar() const { return g_; }
  Lexer& lexer() const { return *lexer_; }
  // The expressions, for callers that hold lock() (diagnostics, tests).
  ExprStore& store_locked() const { return *store_; }
  std::unique_lock<std::mutex> lock() const { return std::unique_lock<std::mutex>(mu_); }

 private:
  mutable std::mutex mu_;
  std::unique_ptr<ExprStore> store_;
  Grammar g_;
  std::unique_ptr<Lexer> lexer_;
};

}  // namespace tandem::structured
