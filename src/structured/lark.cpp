#include "structured/lark.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "core/error.h"
#include "structured/charset.h"
#include "structured/grammar.h"
#include "structured/regex.h"

namespace tandem::structured {

namespace {

// Lark's common.lark, written for this parser (ESCAPED_STRING and C_COMMENT without
// lookbehind or lazy quantifiers, same languages).
const char* kCommon = R"(
DIGIT: "0".."9"
HEXDIGIT: "a".."f" | "A".."F" | DIGIT
INT: DIGIT+
SIGNED_INT: ["+"|"-"] INT
DECIMAL: INT "." INT? | "." INT
_EXP: ("e"|"E") SIGNED_INT
FLOAT: INT _EXP | DECIMAL _EXP?
SIGNED_FLOAT: ["+"|"-"] FLOAT
NUMBER: FLOAT | INT
SIGNED_NUMBER: ["+"|"-"] NUMBER
ESCAPED_STRING: /"([^"\\\n]|\\[^\n])*"/
LCASE_LETTER: "a".."z"
UCASE_LETTER: "A".."Z"
LETTER: UCASE_LETTER | LCASE_LETTER
WORD: LETTER+
CNAME: ("_"|LETTER) ("_"|LETTER|DIGIT)*
WS_INLINE: (" "|/\t/)+
WS: /[ \t\f\r\n]/+
CR: /\r/
LF: /\n/
NEWLINE: (CR? LF)+
SH_COMMENT: /#[^\n]*/
CPP_COMMENT: /\/\/[^\n]*/
C_COMMENT: /\/\*([^*]|\*+[^*\/])*\*+\//
SQL_COMMENT: /--[^\n]*/
)";

struct Node {
  enum Kind { kAlt, kSeq, kName, kString, kRegex, kRange, kRepeat } kind;
  std::vector<Node> kids;
  std::string text, text2;  // kString/kRegex/kName: text; kRange: text..text2; kRegex flags
  bool icase = false;
  uint32_t min = 0, max = 0;
};

Node make_node(Node::Kind k) {
  Node n;
  n.kind = k;
  return n;
}

struct Def {
  std::string name;
  Node body;
  int line;
};

bool is_terminal_name(const std::string& n) {
  size_t i = n.find_first_not_of('_');
  return i != std::string::npos && isupper(uint8_t(n[i]));
}

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  void run(std::vector<Def>& rules, std::vector<Def>& terms, std::vector<Node>& ignores,
           std::vector<std::pair<std::string, std::string>>& imports) {
    while (true) {
      skip_space(true);
      if (at_end()) break;
      int line = line_;
      if (peek() == '%') {
        directive(ignores, imports);
        continue;
      }
      if (peek() == '?' || peek() == '!') ++pos_;  // inline / keep-all: no effect here
      std::string name = ident();
      if (name.empty()) bad("a rule or terminal name");
      if (peek() == '{') unsupported("templates");
      if (peek() == '.') {  // priority
        ++pos_;
        if (!isdigit(uint8_t(peek())) && peek() != '-') bad("a priority number");
        if (peek() == '-') ++pos_;
        while (isdigit(uint8_t(peek()))) ++pos_;
      }
      skip_space(false);
      if (peek() != ':') bad("':'");
      ++pos_;
      Node body = alternatives();
      end_of_statement();
      (is_terminal_name(name) ? terms : rules).push_back({name, std::move(body), line});
    }
  }

 private:
  [[noreturn]] void bad(const std::string& want) {
    fail(ErrorKind::kInvalidArgument, "grammar: line {}: expected {}", line_, want);
  }
  [[noreturn]] void unsupported(const std::string& what) {
    fail(ErrorKind::kUnsupported, "grammar: line {}: {} are not supported", line_, what);
  }
  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }

  // Skips blanks and comments; newlines too when `newlines`, and otherwise a newline that
  // continues the statement (the next line starts with blanks or '|').
  void skip_space(bool newlines) {
    while (!at_end()) {
      char c = peek();
      if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else if (c == '/' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '/') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else if (c == '#' && newlines) {
        while (!at_end() && peek() != '\n') ++pos_;
      } else if (c == '\n') {
        if (newlines) {
          ++pos_, ++line_;
          continue;
        }
        // A continuation line starts with whitespace or '|' (after blank lines).
        size_t p = pos_;
        int lines = 0;
        while (p < s_.size() && (s_[p] == '\n' || s_[p] == '\r')) {
          if (s_[p] == '\n') ++lines;
          ++p;
        }
        size_t q = p;
        while (q < s_.size() && (s_[q] == ' ' || s_[q] == '\t')) ++q;
        bool cont = q < s_.size() && (q > p || s_[q] == '|') &&
                    !(q + 1 < s_.size() && s_[q] == '/' && s_[q + 1] == '/' && q == p);
        if (!cont) return;
        pos_ = p;
        line_ += lines;
      } else {
        return;
      }
    }
  }

  void end_of_statement() {
    skip_space(false);
    if (!at_end() && peek() != '\n') bad("the end of the line");
  }

  std::string ident() {
    size_t start = pos_;
    while (!at_end() && (isalnum(uint8_t(peek())) || peek() == '_')) ++pos_;
    return s_.substr(start, pos_ - start);
  }

  void directive(std::vector<Node>& ignores,
                 std::vector<std::pair<std::string, std::string>>& imports) {
    ++pos_;
    std::string d = ident();
    skip_space(false);
    if (d == "ignore") {
      ignores.push_back(alternatives());
    } else if (d == "import") {
      std::string path;
      while (!at_end() && (isalnum(uint8_t(peek())) || peek() == '_' || peek() == '.'))
        path += s_[pos_++];
      skip_space(false);
      std::vector<std::pair<std::string, std::string>> names;
      if (peek() == '(') {
        ++pos_;
        while (true) {
          skip_space(false);
          std::string n = ident();
          if (n.empty()) bad("a name to import");
          names.push_back({n, n});
          skip_space(false);
          if (peek() == ',') {
            ++pos_;
            continue;
          }
          if (peek() == ')') {
            ++pos_;
            break;
          }
          bad("',' or ')'");
        }
      } else {
        size_t dot = path.rfind('.');
        if (dot == std::string::npos) bad("common.NAME");
        std::string n = path.substr(dot + 1);
        path = path.substr(0, dot);
        std::string alias = n;
        skip_space(false);
        if (s_.compare(pos_, 2, "->") == 0) {
          pos_ += 2;
          skip_space(false);
          alias = ident();
        }
        names.push_back({n, alias});
      }
      if (path != "common")
        fail(ErrorKind::kUnsupported, "grammar: line {}: only %import common is supported", line_);
      for (auto& n : names) imports.push_back(n);
    } else {
      unsupported("%" + d + " directives");
    }
    end_of_statement();
  }

  Node alternatives() {
    Node alt = make_node(Node::kAlt);
    alt.kids.push_back(sequence());
    while (true) {
      skip_space(false);
      if (peek() != '|') break;
      ++pos_;
      alt.kids.push_back(sequence());
    }
    return alt.kids.size() == 1 ? std::move(alt.kids[0]) : std::move(alt);
  }

  Node sequence() {
    Node seq = make_node(Node::kSeq);
    while (true) {
      skip_space(false);
      char c = peek();
      if (at_end() || c == '\n' || c == '|' || c == ')' || c == ']') break;
      if (c == '-' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '>') {  // alias
        pos_ += 2;
        skip_space(false);
        ident();
        continue;
      }
      seq.kids.push_back(item());
    }
    return seq;
  }

  Node item() {
    Node a = atom();
    while (true) {
      char c = peek();
      if (c == '?' || c == '*' || c == '+') {
        ++pos_;
        Node r = make_node(Node::kRepeat);
        r.min = c == '+' ? 1 : 0;
        r.max = c == '?' ? 1 : kUnbounded;
        r.kids.push_back(std::move(a));
        a = std::move(r);
        continue;
      }
      size_t save = pos_;
      skip_space(false);
      if (peek() == '~') {
        ++pos_;
        skip_space(false);
        uint32_t lo = number(), hi = lo;
        if (s_.compare(pos_, 2, "..") == 0) {
          pos_ += 2;
          hi = number();
        }
        if (hi < lo) bad("n..m with m >= n");
        Node r = make_node(Node::kRepeat);
        r.min = lo;
        r.max = hi;
        r.kids.push_back(std::move(a));
        a = std::move(r);
        continue;
      }
      pos_ = save;
      return a;
    }
  }

  uint32_t number() {
    uint64_t v = 0;
    size_t start = pos_;
    while (isdigit(uint8_t(peek()))) {
      v = v * 10 + uint64_t(peek() - '0');
      if (v > 100000) bad("a repeat count up to 100000");
      ++pos_;
    }
    if (pos_ == start) bad("a number");
    return uint32_t(v);
  }

  std::string string_literal() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (at_end() || peek() == '\n') bad("the end of a string");
      char c = s_[pos_++];
      if (c == '"') break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_end()) bad("an escape");
      char e = s_[pos_++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case '0':
          out += '\0';
          break;
        case '\\':
          out += '\\';
          break;
        case '"':
          out += '"';
          break;
        case '\'':
          out += '\'';
          break;
        case 'x':
        case 'u':
        case 'U': {
          int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + n > s_.size()) bad("hex digits");
          uint32_t cp = uint32_t(std::stoul(s_.substr(pos_, n), nullptr, 16));
          pos_ += n;
          append_utf8(out, cp);
          break;
        }
        default:
          out += '\\', out += e;
      }
    }
    return out;
  }

  Node atom() {
    char c = peek();
    if (c == '(' || c == '[') {
      ++pos_;
      Node inner = alternatives();
      skip_space(false);
      if (peek() != (c == '(' ? ')' : ']')) bad(c == '(' ? "')'" : "']'");
      ++pos_;
      if (c == '(') return inner;
      Node r = make_node(Node::kRepeat);
      r.min = 0;
      r.max = 1;
      r.kids.push_back(std::move(inner));
      return r;
    }
    if (c == '"') {
      Node n = make_node(Node::kString);
      n.text = string_literal();
      if (peek() == 'i') ++pos_, n.icase = true;
      if (s_.compare(pos_, 2, "..") == 0) {
        pos_ += 2;
        if (peek() != '"') bad("a string after '..'");
        n.kind = Node::kRange;
        n.text2 = string_literal();
      }
      return n;
    }
    if (c == '/') {
      ++pos_;
      Node n = make_node(Node::kRegex);
      while (true) {
        if (at_end() || peek() == '\n') bad("the end of a /regex/");
        char x = s_[pos_++];
        if (x == '/') break;
        n.text += x;
        if (x == '\\' && !at_end()) n.text += s_[pos_++];
      }
      while (isalpha(uint8_t(peek()))) n.text2 += s_[pos_++];
      return n;
    }
    std::string name = ident();
    if (name.empty()) bad("a name, string, regex or group");
    if (peek() == '{') unsupported("templates");
    Node n = make_node(Node::kName);
    n.text = name;
    return n;
  }

  const std::string& s_;
  size_t pos_ = 0;
  int line_ = 1;
};

class Compiler {
 public:
  Compiler(ExprStore& st, GrammarBuilder& gb) : st_(st), gb_(gb) {}

  void load(const std::string& text) {
    std::vector<Def> rules, terms;
    std::vector<Node> ignores;
    std::vector<std::pair<std::string, std::string>> imports;
    Parser(text).run(rules, terms, ignores, imports);
    for (Def& d : rules) {
      if (rules_.count(d.name))
        fail(ErrorKind::kInvalidArgument, "grammar: line {}: rule '{}' is defined twice", d.line,
             d.name);
      rules_[d.name] = std::move(d);
    }
    for (Def& d : terms) {
      if (terms_.count(d.name))
        fail(ErrorKind::kInvalidArgument, "grammar: line {}: terminal '{}' is defined twice",
             d.line, d.name);
      terms_[d.name] = std::move(d);
    }
    if (!imports.empty()) {
      std::vector<Def> crules, cterms;
      std::vector<Node> ci;
      std::vector<std::pair<std::string, std::string>> cimp;
      std::string common = kCommon;
      Parser(common).run(crules, cterms, ci, cimp);
      std::map<std::string, Def> lib;
      for (Def& d : cterms) lib[d.name] = d;
      // An import brings the terminal and those it uses.
      std::vector<std::string> todo;
      for (auto& [n, alias] : imports) {
        if (!lib.count(n))
          fail(ErrorKind::kInvalidArgument, "grammar: common has no terminal '{}'", n);
        Def d = lib[n];
        d.name = alias;
        terms_[alias] = d;
        todo.push_back(n);
      }
      while (!todo.empty()) {
        std::string n = todo.back();
        todo.pop_back();
        collect_names(lib[n].body, [&](const std::string& used) {
          if (!terms_.count(used) && lib.count(used)) {
            terms_[used] = lib[used];
            todo.push_back(used);
          }
        });
      }
    }
    std::vector<ExprId> ign;
    for (Node& n : ignores) ign.push_back(term(n));
    ignore_ = ign.empty() ? kEpsilon : st_.star(st_.alt(ign));
    have_ignore_ = !ign.empty();
  }

  uint32_t start() {
    if (!rules_.count("start"))
      fail(ErrorKind::kInvalidArgument, "grammar: there is no 'start' rule");
    return rule_nt("start");
  }
  bool have_ignore() const { return have_ignore_; }
  ExprId ignore_plus() { return st_.plus(ignore_ == kEpsilon ? kNothing : ignore_); }
  ExprId ignore_star() const { return ignore_; }

  // Every rule reachable from start gets its rules added.
  void build_rules() {
    while (!pending_.empty()) {
      std::string n = pending_.back();
      pending_.pop_back();
      const Def& d = rules_.at(n);
      uint32_t nt = rule_nts_.at(n);
      if (d.body.kind == Node::kAlt) {
        for (const Node& alt : d.body.kids) gb_.add_rule(nt, seq(alt));
      } else {
        gb_.add_rule(nt, seq(d.body));
      }
    }
  }

  Symbol lexeme(ExprId e, const std::string& name) {
    if (st_.nullable(e) && e != kEpsilon) {
      // An empty-matching terminal: the builder splits it; keep the name.
    }
    return gb_.lexeme(st_.concat(ignore_, e), name);
  }

 private:
  template <typename F>
  void collect_names(const Node& n, F&& f) {
    if (n.kind == Node::kName) f(n.text);
    for (const Node& k : n.kids) collect_names(k, f);
  }

  uint32_t rule_nt(const std::string& name) {
    auto it = rule_nts_.find(name);
    if (it != rule_nts_.end()) return it->second;
    if (!rules_.count(name))
      fail(ErrorKind::kInvalidArgument, "grammar: rule '{}' is used but not defined", name);
    uint32_t nt = gb_.add_nonterminal(name);
    rule_nts_[name] = nt;
    pending_.push_back(name);
    return nt;
  }

  std::vector<Symbol> seq(const Node& n) {
    std::vector<Symbol> out;
    if (n.kind == Node::kSeq) {
      for (const Node& k : n.kids) {
        std::vector<Symbol> part = seq(k);
        out.insert(out.end(), part.begin(), part.end());
      }
    } else {
      out.push_back(symbol(n));
    }
    return out;
  }

  Symbol symbol(const Node& n) {
    switch (n.kind) {
      case Node::kName:
        if (is_terminal_name(n.text)) return lexeme(term_named(n.text), n.text);
        return GrammarBuilder::nt(rule_nt(n.text));
      case Node::kString:
      case Node::kRegex:
      case Node::kRange:
        return lexeme(term(n), n.kind == Node::kString ? "\"" + n.text + "\"" : "/" + n.text + "/");
      case Node::kSeq: {
        uint32_t nt = gb_.add_nonterminal("group");
        gb_.add_rule(nt, seq(n));
        return GrammarBuilder::nt(nt);
      }
      case Node::kAlt: {
        uint32_t nt = gb_.add_nonterminal("group");
        for (const Node& k : n.kids) gb_.add_rule(nt, seq(k));
        return GrammarBuilder::nt(nt);
      }
      case Node::kRepeat: {
        Symbol inner = symbol(n.kids[0]);
        if (n.min == 0 && n.max == 1) return gb_.optional(inner);
        if (n.min == 0 && n.max == kUnbounded) return gb_.star(inner);
        if (n.min == 1 && n.max == kUnbounded) return gb_.plus(inner);
        // inner ~ min..max: min copies, then up to (max - min) optional ones, nested.
        uint32_t nt = gb_.add_nonterminal("repeat");
        std::vector<Symbol> rhs(n.min, inner);
        if (n.max == kUnbounded) {
          rhs.push_back(gb_.star(inner));
        } else if (n.max > n.min) {
          Symbol tail = gb_.optional(inner);
          for (uint32_t i = n.min + 1; i < n.max; ++i) {
            uint32_t t = gb_.add_nonterminal("repeat");
            gb_.add_rule(t, {});
            gb_.add_rule(t, {inner, tail});
            tail = GrammarBuilder::nt(t);
          }
          rhs.push_back(tail);
        }
        gb_.add_rule(nt, std::move(rhs));
        return GrammarBuilder::nt(nt);
      }
    }
    return 0;
  }

  ExprId term_named(const std::string& name) {
    if (auto it = term_exprs_.find(name); it != term_exprs_.end()) return it->second;
    auto d = terms_.find(name);
    if (d == terms_.end())
      fail(ErrorKind::kInvalidArgument, "grammar: terminal '{}' is used but not defined", name);
    if (expanding_.count(name))
      fail(ErrorKind::kInvalidArgument,
           "grammar: line {}: terminal '{}' refers to itself (terminals must be regular; use a "
           "rule)",
           d->second.line, name);
    expanding_.insert(name);
    ExprId e = term(d->second.body);
    expanding_.erase(name);
    term_exprs_[name] = e;
    return e;
  }

  ExprId term(const Node& n) {
    switch (n.kind) {
      case Node::kAlt: {
        std::vector<ExprId> alts;
        for (const Node& k : n.kids) alts.push_back(term(k));
        return st_.alt(alts);
      }
      case Node::kSeq: {
        std::vector<ExprId> parts;
        for (const Node& k : n.kids) parts.push_back(term(k));
        return st_.concat(parts);
      }
      case Node::kName:
        if (!is_terminal_name(n.text))
          fail(ErrorKind::kInvalidArgument,
               "grammar: a terminal uses the rule '{}' (terminals may use only terminals)", n.text);
        return term_named(n.text);
      case Node::kString: {
        if (!n.icase) return st_.literal(n.text);
        std::vector<ExprId> parts;
        for (size_t i = 0; i < n.text.size();) {
          uint32_t cp;
          if (!decode_utf8(n.text, i, cp))
            fail(ErrorKind::kInvalidArgument, "grammar: a string is not valid UTF-8");
          parts.push_back(
              char_expr(st_, CharSet::single(cp).ascii_case_folded(), TextEncoding::kUtf8));
        }
        return st_.concat(parts);
      }
      case Node::kRange: {
        size_t i = 0, j = 0;
        uint32_t a, b;
        if (!decode_utf8(n.text, i, a) || i != n.text.size() || !decode_utf8(n.text2, j, b) ||
            j != n.text2.size() || b < a)
          fail(ErrorKind::kInvalidArgument,
               "grammar: a range \"a\"..\"z\" needs single characters in order");
        return char_expr(st_, CharSet::range(a, b), TextEncoding::kUtf8);
      }
      case Node::kRegex: {
        RegexOptions o;
        o.match = RegexMatch::kFull;
        for (char f : n.text2) {
          if (f == 'i')
            o.case_insensitive = true;
          else if (f == 's')
            o.dot_all = true;
          else if (f != 'u')
            fail(ErrorKind::kUnsupported, "grammar: the regex flag '{}' is not supported", f);
        }
        return compile_regex(st_, n.text, o);
      }
      case Node::kRepeat:
        return st_.repeat(term(n.kids[0]), n.min, n.max);
    }
    return kNothing;
  }

  ExprStore& st_;
  GrammarBuilder& gb_;
  std::map<std::string, Def> rules_, terms_;
  std::map<std::string, uint32_t> rule_nts_;
  std::vector<std::string> pending_;
  std::map<std::string, ExprId> term_exprs_;
  std::set<std::string> expanding_;
  ExprId ignore_ = kEpsilon;
  bool have_ignore_ = false;
};

}  // namespace

std::shared_ptr<const CompiledGrammar> compile_lark(const std::string& text,
                                                    const std::string& prefix,
                                                    const std::string& suffix) {
  auto store = std::make_unique<ExprStore>();
  GrammarBuilder gb(*store);
  Compiler c(*store, gb);
  c.load(text);
  uint32_t start = c.start();
  c.build_rules();
  uint32_t top = gb.add_nonterminal("grammar");
  std::vector<Symbol> rhs;
  if (!prefix.empty()) rhs.push_back(gb.lexeme(store->literal(prefix), "prefix"));
  rhs.push_back(GrammarBuilder::nt(start));
  // What %ignore allows may also trail the text.
  if (c.have_ignore()) rhs.push_back(gb.optional(gb.lexeme(c.ignore_plus(), "ignored")));
  if (!suffix.empty()) rhs.push_back(gb.lexeme(store->literal(suffix), "suffix"));
  gb.add_rule(top, std::move(rhs));
  Grammar g = gb.finish(top, "the grammar");
  return std::make_shared<CompiledGrammar>(std::move(store), std::move(g));
}

}  // namespace tandem::structured
