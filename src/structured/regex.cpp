#include "structured/regex.h"

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"

namespace tandem::structured {

namespace {

struct Node {
  enum Kind { kChars, kSeq, kAlt, kRepeat, kStart, kEnd } kind;
  CharSet chars;
  std::vector<std::unique_ptr<Node>> kids;
  uint32_t min = 0, max = 0;
};
using NodeP = std::unique_ptr<Node>;

NodeP make(Node::Kind k) {
  auto n = std::make_unique<Node>();
  n->kind = k;
  return n;
}

CharSet digit_set() {
  return CharSet::range('0', '9');
}
CharSet word_set() {
  CharSet s = CharSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_', '_');
  return s;
}
CharSet space_set() {
  CharSet s;
  s.add('\t', '\r');  // \t \n \v \f \r
  s.add(' ', ' ');
  s.add(0xA0, 0xA0);
  s.add(0x1680, 0x1680);
  s.add(0x2000, 0x200A);
  s.add(0x2028, 0x2029);
  s.add(0x202F, 0x202F);
  s.add(0x205F, 0x205F);
  s.add(0x3000, 0x3000);
  s.add(0xFEFF, 0xFEFF);
  return s;
}
CharSet line_terminators() {
  CharSet s;
  s.add('\n', '\n');
  s.add('\r', '\r');
  s.add(0x2028, 0x2029);
  return s;
}

class Parser {
 public:
  Parser(std::string_view p, const RegexOptions& o) : p_(p), opt_(o) {}

  NodeP parse() {
    NodeP n = alternation();
    if (pos_ < p_.size()) {
      if (p_[pos_] == ')') bad("unmatched ')'");
      bad("unexpected character");
    }
    return n;
  }

 private:
  [[noreturn]] void bad(const char* what) {
    fail(ErrorKind::kInvalidArgument, "regex: {} at offset {} of /{}/", what, pos_, p_);
  }
  [[noreturn]] void unsupported(const char* what) {
    fail(ErrorKind::kUnsupported, "regex: {} (offset {} of /{}/) is not supported", what, pos_, p_);
  }
  bool at_end() const { return pos_ >= p_.size(); }
  char peek() const { return p_[pos_]; }

  NodeP alternation() {
    NodeP first = sequence();
    if (at_end() || peek() != '|') return first;
    NodeP alt = make(Node::kAlt);
    alt->kids.push_back(std::move(first));
    while (!at_end() && peek() == '|') {
      ++pos_;
      alt->kids.push_back(sequence());
    }
    return alt;
  }

  NodeP sequence() {
    NodeP seq = make(Node::kSeq);
    while (!at_end() && peek() != '|' && peek() != ')') {
      NodeP atom = this->atom();
      atom = quantified(std::move(atom));
      seq->kids.push_back(std::move(atom));
    }
    return seq;
  }

  // Parses {n}, {n,}, {n,m} at pos_ (on '{'); false (pos_ unchanged) when it is not one,
  // and the brace is then a literal.
  bool braces(uint32_t& min, uint32_t& max) {
    size_t save = pos_;
    ++pos_;
    auto number = [&](uint32_t& v) {
      size_t start = pos_;
      uint64_t x = 0;
      while (!at_end() && peek() >= '0' && peek() <= '9') {
        x = x * 10 + uint64_t(peek() - '0');
        if (x > 100000) unsupported("a repetition count above 100000");
        ++pos_;
      }
      v = uint32_t(x);
      return pos_ > start;
    };
    if (!number(min)) {
      pos_ = save;
      return false;
    }
    max = min;
    if (!at_end() && peek() == ',') {
      ++pos_;
      if (!number(max)) max = kUnbounded;
    }
    if (at_end() || peek() != '}') {
      pos_ = save;
      return false;
    }
    ++pos_;
    if (max != kUnbounded && max < min) bad("repetition {n,m} with m < n");
    return true;
  }

  NodeP quantified(NodeP atom) {
    while (!at_end()) {
      uint32_t min, max;
      char c = peek();
      if (c == '*') {
        min = 0, max = kUnbounded, ++pos_;
      } else if (c == '+') {
        min = 1, max = kUnbounded, ++pos_;
      } else if (c == '?') {
        min = 0, max = 1, ++pos_;
      } else if (c == '{') {
        if (!braces(min, max)) return atom;
      } else {
        return atom;
      }
      if (atom->kind == Node::kStart || atom->kind == Node::kEnd) bad("quantifier on an anchor");
      if (!at_end() && peek() == '?') {
        ++pos_;  // lazy: the same language
      } else if (!at_end() && peek() == '+') {
        unsupported("a possessive quantifier");
      }
      NodeP r = make(Node::kRepeat);
      r->min = min;
      r->max = max;
      r->kids.push_back(std::move(atom));
      atom = std::move(r);
    }
    return atom;
  }

  NodeP chars(CharSet s) {
    NodeP n = make(Node::kChars);
    n->chars = opt_.case_insensitive ? s.ascii_case_folded() : std::move(s);
    return n;
  }

  uint32_t utf8_char() {
    uint32_t cp;
    std::string s(p_.substr(pos_, 4));
    size_t i = 0;
    if (!decode_utf8(s, i, cp)) bad("invalid UTF-8");
    pos_ += i;
    return cp;
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      if (at_end() || !isxdigit(uint8_t(peek()))) bad("bad hex escape");
      char c = peek();
      v = v * 16 + uint32_t(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
      ++pos_;
    }
    return v;
  }

  // After a backslash: a class escape (\d ...) sets `set` and returns true; a character
  // escape sets `cp`.
  bool escape(bool in_class, CharSet& set, uint32_t& cp) {
    if (at_end()) bad("trailing backslash");
    char c = peek();
    ++pos_;
    switch (c) {
      case 'd':
        set = digit_set();
        return true;
      case 'D':
        set = digit_set().complement();
        return true;
      case 'w':
        set = word_set();
        return true;
      case 'W':
        set = word_set().complement();
        return true;
      case 's':
        set = space_set();
        return true;
      case 'S':
        set = space_set().complement();
        return true;
      case 'n':
        cp = '\n';
        return false;
      case 'r':
        cp = '\r';
        return false;
      case 't':
        cp = '\t';
        return false;
      case 'f':
        cp = '\f';
        return false;
      case 'v':
        cp = '\v';
        return false;
      case '0':
        if (!at_end() && isdigit(uint8_t(peek()))) unsupported("an octal escape");
        cp = 0;
        return false;
      case 'x':
        cp = hex(2);
        return false;
      case 'u':
        if (!at_end() && peek() == '{') {
          ++pos_;
          cp = 0;
          int n = 0;
          while (!at_end() && peek() != '}') {
            cp = cp * 16 + hex(1);
            if (++n > 6) bad("bad \\u{...} escape");
          }
          if (at_end() || n == 0) bad("bad \\u{...} escape");
          ++pos_;
        } else {
          cp = hex(4);
          // A surrogate pair written as two escapes is one character.
          if (cp >= 0xD800 && cp <= 0xDBFF && p_.substr(pos_, 2) == "\\u") {
            size_t save = pos_;
            pos_ += 2;
            uint32_t lo = hex(4);
            if (lo >= 0xDC00 && lo <= 0xDFFF)
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            else
              pos_ = save;
          }
        }
        if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF))
          unsupported("a lone surrogate escape");
        return false;
      case 'c':
        if (at_end() || !isalpha(uint8_t(peek()))) bad("bad \\c escape");
        cp = uint32_t(peek()) % 32;
        ++pos_;
        return false;
      case 'b':
        if (in_class) {
          cp = '\b';
          return false;
        }
        unsupported("a word boundary \\b");
      case 'B':
        unsupported("a non-word-boundary \\B");
      case 'p':
      case 'P':
        unsupported("a Unicode property escape \\p{...}");
      case 'k':
        unsupported("a named backreference \\k");
      default:
        if (c >= '1' && c <= '9') unsupported("a backreference");
        if (isalnum(uint8_t(c))) bad("unknown escape");
        --pos_;
        cp = utf8_char();
        return false;
    }
  }

  NodeP klass() {
    ++pos_;  // '['
    bool negate = false;
    if (!at_end() && peek() == '^') {
      negate = true;
      ++pos_;
    }
    CharSet set;
    bool first = true;
    while (true) {
      if (at_end()) bad("unterminated character class");
      if (peek() == ']' && !first) break;
      if (peek() == ']' && first) {
        // ECMA: [] matches nothing and [^] everything.
        break;
      }
      first = false;
      CharSet item;
      uint32_t lo;
      bool is_set = false;
      if (peek() == '\\') {
        ++pos_;
        is_set = escape(true, item, lo);
      } else {
        if (peek() == '[' && p_.substr(pos_, 2) == "[:") unsupported("a POSIX class [:...:]");
        lo = utf8_char();
      }
      if (!is_set && !at_end() && peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        ++pos_;
        uint32_t hi;
        CharSet hs;
        if (peek() == '\\') {
          ++pos_;
          if (escape(true, hs, hi)) bad("a class escape as a range end");
        } else {
          hi = utf8_char();
        }
        if (hi < lo) bad("range out of order in character class");
        set.add(lo, hi);
        continue;
      }
      if (is_set)
        set.add(item);
      else
        set.add(lo, lo);
    }
    ++pos_;  // ']'
    if (opt_.case_insensitive) set = set.ascii_case_folded();
    return chars(negate ? set.complement() : set);
  }

  NodeP atom() {
    char c = peek();
    switch (c) {
      case '(': {
        ++pos_;
        if (!at_end() && peek() == '?') {
          ++pos_;
          if (at_end()) bad("bad group");
          char k = peek();
          if (k == ':') {
            ++pos_;
          } else if (k == '=' || k == '!') {
            unsupported("a lookahead");
          } else if (k == '<' && pos_ + 1 < p_.size() &&
                     (p_[pos_ + 1] == '=' || p_[pos_ + 1] == '!')) {
            unsupported("a lookbehind");
          } else if (k == '<' || (k == 'P' && pos_ + 1 < p_.size() && p_[pos_ + 1] == '<')) {
            if (k == 'P') ++pos_;
            while (!at_end() && peek() != '>') ++pos_;
            if (at_end()) bad("bad group name");
            ++pos_;
          } else if (k == 'P' && pos_ + 1 < p_.size() && p_[pos_ + 1] == '=') {
            unsupported("a named backreference (?P=...)");
          } else {
            unsupported("an inline flag group (?...)");
          }
        }
        NodeP inner = alternation();
        if (at_end() || peek() != ')') bad("missing ')'");
        ++pos_;
        return inner;
      }
      case '[':
        return klass();
      case '.': {
        ++pos_;
        CharSet all = CharSet::all();
        return chars(opt_.dot_all ? all : all.minus(line_terminators()));
      }
      case '^':
        ++pos_;
        return make(Node::kStart);
      case '$':
        ++pos_;
        return make(Node::kEnd);
      case '\\': {
        ++pos_;
        CharSet set;
        uint32_t cp;
        if (escape(false, set, cp)) return chars(std::move(set));
        return chars(CharSet::single(cp));
      }
      case '*':
      case '+':
      case '?':
        bad("quantifier without an operand");
      default:
        if (c == '{') {
          uint32_t a, b;
          size_t save = pos_;
          if (braces(a, b)) {
            pos_ = save;
            bad("quantifier without an operand");
          }
        }
        return chars(CharSet::single(utf8_char()));
    }
  }

  std::string_view p_;
  const RegexOptions& opt_;
  size_t pos_ = 0;
};

class Builder {
 public:
  Builder(ExprStore& st, const RegexOptions& o, std::string_view p) : st_(st), opt_(o), p_(p) {}

  ExprId top(Node& n) {
    if (n.kind == Node::kAlt) {
      std::vector<ExprId> alts;
      for (auto& k : n.kids) alts.push_back(branch(*k));
      return st_.alt(alts);
    }
    return branch(n);
  }

 private:
  [[noreturn]] void anchor_error() {
    fail(ErrorKind::kUnsupported,
         "regex: an anchor (^ or $) inside /{}/ is supported only at the edges of the pattern", p_);
  }

  // Removes a leading ^ (front) or trailing $ (!front) from the edge of `n`, reporting
  // whether one was there. An alternation at the edge must be anchored in all or none of
  // its branches.
  bool strip(Node& n, bool front) {
    Node::Kind anchor = front ? Node::kStart : Node::kEnd;
    if (n.kind == anchor) {
      n.kind = Node::kSeq;
      return true;
    }
    if (n.kind == Node::kSeq) {
      // Skip empty groups at the edge.
      auto& kids = n.kids;
      for (size_t k = 0; k < kids.size(); ++k) {
        size_t i = front ? k : kids.size() - 1 - k;
        Node& edge = *kids[i];
        if (edge.kind == Node::kSeq && edge.kids.empty()) continue;
        bool had = strip(edge, front);
        // Several anchors in a row (^^) are one.
        if (had) {
          for (size_t k2 = k + 1; k2 < kids.size(); ++k2) {
            size_t j = front ? k2 : kids.size() - 1 - k2;
            if (kids[j]->kind != anchor) break;
            kids[j]->kind = Node::kSeq;
          }
        }
        return had;
      }
      return false;
    }
    if (n.kind == Node::kAlt) {
      int count = 0;
      for (auto& k : n.kids) count += strip(*k, front) ? 1 : 0;
      if (count != 0 && count != int(n.kids.size())) anchor_error();
      return count != 0;
    }
    return false;
  }

  ExprId branch(Node& n) {
    if (opt_.match == RegexMatch::kFull) {
      strip(n, true);
      strip(n, false);
      return build(n);
    }
    bool s = strip(n, true), e = strip(n, false);
    ExprId any = st_.star(char_expr(st_, CharSet::all(), opt_.encoding));
    ExprId parts[3] = {s ? kEpsilon : any, build(n), e ? kEpsilon : any};
    return st_.concat(parts);
  }

  ExprId build(Node& n) {
    switch (n.kind) {
      case Node::kChars:
        return char_expr(st_, n.chars, opt_.encoding);
      case Node::kSeq: {
        std::vector<ExprId> parts;
        for (auto& k : n.kids) parts.push_back(build(*k));
        return st_.concat(parts);
      }
      case Node::kAlt: {
        std::vector<ExprId> alts;
        for (auto& k : n.kids) alts.push_back(build(*k));
        return st_.alt(alts);
      }
      case Node::kRepeat:
        return st_.repeat(build(*n.kids[0]), n.min, n.max);
      case Node::kStart:
      case Node::kEnd:
        anchor_error();
    }
    return kNothing;
  }

  ExprStore& st_;
  const RegexOptions& opt_;
  std::string_view p_;
};

}  // namespace

ExprId compile_regex(ExprStore& store, std::string_view pattern, const RegexOptions& opt) {
  Parser parser(pattern, opt);
  NodeP root = parser.parse();
  Builder b(store, opt, pattern);
  return b.top(*root);
}

}  // namespace tandem::structured
