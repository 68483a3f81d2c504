#pragma once
// Grammars in Lark-style EBNF (the `guided_grammar` / `structured_outputs.grammar` text).
//
//   start: greeting name "!"?          rules are lowercase; `start` is where it begins
//   greeting: "hello" | "hi"i          strings, with the `i` flag for ASCII case
//   name: NAME ("," NAME)*             ( ) groups, [ ] optional, ? * + and ~ n / ~ n..m
//   NAME: /[A-Za-z]+/ | DIGIT+         terminals are UPPERCASE: strings, /regex/ (flags i
//                                      and s), "a".."z" ranges, other terminals
//   %import common.DIGIT               Lark's common terminals (WS, NUMBER, CNAME, ...)
//   %ignore WS                         terminals that may appear between any two others
//
// Terminals (and the strings and regexes written in rules) are matched as Lark's lexer
// matches them: longest match first, among those the parser allows at that point. Rules
// are a context-free grammar over them (any ambiguity allowed). Rule and terminal
// priorities (`rule.2`), aliases (`-> name`) and the `?`/`!` rule prefixes are accepted and
// change nothing about which texts match. Refused: %declare, %override, %extend, lookaround
// and backreferences in regexes, templates.
#include <memory>
#include <string>

#include "structured/compiled_grammar.h"

namespace tandem::structured {

// Throws Error(kInvalidArgument) naming the line of a malformed grammar, and
// Error(kUnsupported) for the constructs above. `prefix`/`suffix`: literal text around.
std::shared_ptr<const CompiledGrammar> compile_lark(const std::string& grammar,
                                                    const std::string& prefix = {},
                                                    const std::string& suffix = {});

}  // namespace tandem::structured
