#include "inference/internal/regex.h"

#include <bitset>
#include <cstdint>
#include <utility>
#include <vector>

#include "inference/internal/unicode.h"

namespace envforge::inference::internal {
namespace {

constexpr int kUnbounded = -1;
// Counted repetition is compiled by copying its body; this bounds the copies.
constexpr int kMaxRepeatCount = 1000;

// One member of a character class; the class matches when any item does (before negation).
struct ClassItem {
  enum class Kind : uint8_t { kRange, kCategories, kSpace, kWord } kind = Kind::kRange;
  bool negated = false;  // \P{..}, \S, \W, \D inside a class
  char32_t lo = 0;
  char32_t hi = 0;
  CategoryMask categories = 0;
};

bool IsWordChar(char32_t cp) {
  constexpr CategoryMask kWordCategories =
      CategoryBit(GeneralCategory::kLu) | CategoryBit(GeneralCategory::kLl) |
      CategoryBit(GeneralCategory::kLt) | CategoryBit(GeneralCategory::kLm) |
      CategoryBit(GeneralCategory::kLo) | CategoryBit(GeneralCategory::kMn) |
      CategoryBit(GeneralCategory::kMc) | CategoryBit(GeneralCategory::kMe) |
      CategoryBit(GeneralCategory::kNd) | CategoryBit(GeneralCategory::kPc);
  return (CategoryBit(CategoryOf(cp)) & kWordCategories) != 0;
}

char32_t AsciiSwapCase(char32_t cp) {
  if (cp >= 'a' && cp <= 'z') return cp - 32;
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  return cp;
}

struct CharClass {
  bool negated = false;
  bool fold = false;  // ASCII case-insensitive
  std::vector<ClassItem> items;
  std::bitset<128> ascii;  // precomputed result (negation included) for ASCII

  bool ItemsMatch(char32_t cp) const {
    for (const ClassItem& item : items) {
      bool hit = false;
      switch (item.kind) {
        case ClassItem::Kind::kRange:
          hit = cp >= item.lo && cp <= item.hi;
          break;
        case ClassItem::Kind::kCategories:
          hit = (CategoryBit(CategoryOf(cp)) & item.categories) != 0;
          break;
        case ClassItem::Kind::kSpace:
          hit = IsWhiteSpace(cp);
          break;
        case ClassItem::Kind::kWord:
          hit = IsWordChar(cp);
          break;
      }
      if (hit != item.negated) return true;
    }
    return false;
  }
  bool Compute(char32_t cp) const {
    bool hit = ItemsMatch(cp) || (fold && AsciiSwapCase(cp) != cp && ItemsMatch(AsciiSwapCase(cp)));
    return hit != negated;
  }
  void Finish() {
    for (char32_t cp = 0; cp < 128; ++cp) ascii[cp] = Compute(cp);
  }
  bool Matches(char32_t cp) const { return cp < 128 ? ascii[cp] : Compute(cp); }
};

struct Node {
  enum class Kind : uint8_t {
    kEmpty, kChar, kClass, kAny, kConcat, kAlternate, kRepeat, kLookahead,
    kLineStart, kLineEnd, kTextStart, kTextEnd, kTextEndBeforeNewline,
  } kind = Kind::kEmpty;
  char32_t ch = 0;
  bool fold = false;
  int class_index = -1;
  int min = 0;
  int max = 0;
  bool greedy = true;
  bool negated = false;  // lookahead
  std::vector<std::unique_ptr<Node>> children;
};

enum class Op : uint8_t {
  kChar, kCharFold, kClass, kAny, kSplit, kJump, kLookahead, kLineStart, kLineEnd, kTextStart,
  kTextEnd, kTextEndBeforeNewline, kMatch,
};

struct Inst {
  Op op = Op::kMatch;
  char32_t ch = 0;
  int x = 0;  // kClass: class index; kSplit: preferred target; kJump: target; kLookahead: program
  int y = 0;  // kSplit: other target; kLookahead: 1 when negated
};

}  // namespace

struct Regex::Program {
  std::string pattern;
  std::vector<CharClass> classes;
  std::vector<std::vector<Inst>> programs;  // [0] is the pattern, the rest are lookaheads
};

namespace {

class Parser {
 public:
  Parser(std::string_view pattern, Regex::Program* program) : pattern_(pattern), program_(program) {
    DecodeUtf8(pattern, &decoded_);
  }

  Result<std::unique_ptr<Node>> ParseAll() {
    ENVFORGE_ASSIGN_OR_RETURN(auto node, ParseAlternation(false));
    if (pos_ < size()) return Error("unbalanced ')'");
    return node;
  }

 private:
  size_t size() const { return decoded_.code_points.size(); }
  bool AtEnd() const { return pos_ >= size(); }
  char32_t Peek(size_t ahead = 0) const {
    return pos_ + ahead < size() ? decoded_.code_points[pos_ + ahead] : char32_t{0};
  }
  size_t ByteOffset() const { return decoded_.offsets[std::min(pos_, size())]; }

  Status Error(std::string_view what) const {
    return InvalidArgumentError("regex " + std::string(pattern_) + ": " + std::string(what) +
                                " at offset " + std::to_string(ByteOffset()));
  }
  Status Unsupported(std::string_view construct) const {
    return Error("unsupported construct " + std::string(construct));
  }

  static std::unique_ptr<Node> MakeNode(Node::Kind kind) {
    auto node = std::make_unique<Node>();
    node->kind = kind;
    return node;
  }

  Result<std::unique_ptr<Node>> ParseAlternation(bool fold) {
    auto alternation = MakeNode(Node::Kind::kAlternate);
    while (true) {
      ENVFORGE_ASSIGN_OR_RETURN(auto branch, ParseConcat(fold));
      alternation->children.push_back(std::move(branch));
      if (!AtEnd() && Peek() == '|') {
        ++pos_;
        continue;
      }
      break;
    }
    if (alternation->children.size() == 1) return std::move(alternation->children[0]);
    return alternation;
  }

  Result<std::unique_ptr<Node>> ParseConcat(bool fold) {
    auto concat = MakeNode(Node::Kind::kConcat);
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      ENVFORGE_ASSIGN_OR_RETURN(auto atom, ParseAtom(fold));
      ENVFORGE_ASSIGN_OR_RETURN(atom, ParseQuantifiers(std::move(atom)));
      concat->children.push_back(std::move(atom));
    }
    if (concat->children.size() == 1) return std::move(concat->children[0]);
    return concat;
  }

  // Reads digits; returns -1 when there are none.
  int ReadNumber() {
    int value = -1;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      value = (value < 0 ? 0 : value) * 10 + static_cast<int>(Peek() - '0');
      if (value > 1000000) value = 1000000;
      ++pos_;
    }
    return value;
  }

  // At '{': parses {n} {n,} {n,m} {,m}. Returns false (position unchanged) when the brace does
  // not start a valid interval, which Oniguruma then reads as a literal '{'.
  bool TryParseInterval(int* min, int* max) {
    const size_t start = pos_;
    ++pos_;
    int low = ReadNumber();
    int high = low;
    if (!AtEnd() && Peek() == ',') {
      ++pos_;
      high = ReadNumber();
      if (low < 0 && high < 0) {  // "{,}" is not an interval
        pos_ = start;
        return false;
      }
      if (low < 0) low = 0;
      if (high < 0) high = kUnbounded;
    } else if (low < 0) {
      pos_ = start;
      return false;
    }
    if (AtEnd() || Peek() != '}') {
      pos_ = start;
      return false;
    }
    ++pos_;
    *min = low;
    *max = high;
    return true;
  }

  static bool Nullable(const Node& node) {
    switch (node.kind) {
      case Node::Kind::kChar:
      case Node::Kind::kClass:
      case Node::Kind::kAny:
        return false;
      case Node::Kind::kConcat:
        for (const auto& child : node.children) {
          if (!Nullable(*child)) return false;
        }
        return true;
      case Node::Kind::kAlternate:
        for (const auto& child : node.children) {
          if (Nullable(*child)) return true;
        }
        return false;
      case Node::Kind::kRepeat:
        return node.min == 0 || Nullable(*node.children[0]);
      default:
        return true;
    }
  }

  Result<std::unique_ptr<Node>> ParseQuantifiers(std::unique_ptr<Node> atom) {
    while (!AtEnd()) {
      int min = 0;
      int max = 0;
      const char32_t c = Peek();
      if (c == '*') {
        min = 0, max = kUnbounded, ++pos_;
      } else if (c == '+') {
        min = 1, max = kUnbounded, ++pos_;
      } else if (c == '?') {
        min = 0, max = 1, ++pos_;
      } else if (c == '{') {
        if (!TryParseInterval(&min, &max)) return atom;
        if (max != kUnbounded && max < min) return Error("repetition {n,m} with m < n");
        if (min > kMaxRepeatCount || max > kMaxRepeatCount) return Error("repetition count above 1000");
      } else {
        return atom;
      }
      bool greedy = true;
      if (!AtEnd() && Peek() == '?') {
        greedy = false;
        ++pos_;
      } else if (!AtEnd() && Peek() == '+') {
        return Unsupported("possessive quantifier '+'");
      }
      if (atom->kind == Node::Kind::kLookahead || atom->kind == Node::Kind::kLineStart ||
          atom->kind == Node::Kind::kLineEnd || atom->kind == Node::Kind::kTextStart ||
          atom->kind == Node::Kind::kTextEnd) {
        return Error("quantifier after an assertion");
      }
      if (max == kUnbounded && Nullable(*atom)) {
        return Unsupported("unbounded repetition of an expression that can match empty");
      }
      auto repeat = MakeNode(Node::Kind::kRepeat);
      repeat->min = min;
      repeat->max = max;
      repeat->greedy = greedy;
      repeat->children.push_back(std::move(atom));
      atom = std::move(repeat);
    }
    return atom;
  }

  Result<std::unique_ptr<Node>> ParseGroup(bool fold) {
    ++pos_;  // '('
    bool lookahead = false;
    bool negated = false;
    if (!AtEnd() && Peek() == '?') {
      const char32_t kind = Peek(1);
      if (kind == ':') {
        pos_ += 2;
      } else if (kind == '=' || kind == '!') {
        lookahead = true;
        negated = kind == '!';
        pos_ += 2;
      } else if (kind == 'i' && Peek(2) == ':') {
        fold = true;
        pos_ += 3;
      } else if (kind == '<' && (Peek(2) == '=' || Peek(2) == '!')) {
        return Unsupported("lookbehind '(?<" + std::string(1, static_cast<char>(Peek(2))) + "'");
      } else if (kind == '>') {
        return Unsupported("atomic group '(?>'");
      } else {
        return Unsupported("group flag '(?" + std::string(1, static_cast<char>(kind & 0x7F)) + "'");
      }
    }
    ENVFORGE_ASSIGN_OR_RETURN(auto inner, ParseAlternation(fold));
    if (AtEnd() || Peek() != ')') return Error("missing ')'");
    ++pos_;
    if (!lookahead) return inner;
    auto node = MakeNode(Node::Kind::kLookahead);
    node->negated = negated;
    node->children.push_back(std::move(inner));
    return node;
  }

  // After a backslash: \p{..} / \P{..}. Fills `item`.
  Status ParseProperty(bool negated, ClassItem* item) {
    ++pos_;  // 'p' or 'P'
    std::string name;
    if (!AtEnd() && Peek() == '{') {
      ++pos_;
      while (!AtEnd() && Peek() != '}') {
        AppendUtf8(Peek(), &name);
        ++pos_;
      }
      if (AtEnd()) return Error("missing '}' in \\p{...}");
      ++pos_;
    } else if (!AtEnd()) {
      AppendUtf8(Peek(), &name);
      ++pos_;
    }
    if (!name.empty() && name[0] == '^') {
      negated = !negated;
      name.erase(0, 1);
    }
    const CategoryMask mask = CategoryMaskByName(name);
    if (mask == 0) return Unsupported("Unicode property '\\p{" + name + "}'");
    item->kind = ClassItem::Kind::kCategories;
    item->categories = mask;
    item->negated = negated;
    return Status::Ok();
  }

  // Reads hex digits: exactly `count`, or inside braces when braced. Returns -1 on error.
  long ReadHex(int count, bool braced) {
    long value = 0;
    int digits = 0;
    while (!AtEnd() && (braced ? Peek() != '}' : digits < count)) {
      const char32_t c = Peek();
      int digit = -1;
      if (c >= '0' && c <= '9') digit = static_cast<int>(c - '0');
      if (c >= 'a' && c <= 'f') digit = static_cast<int>(c - 'a' + 10);
      if (c >= 'A' && c <= 'F') digit = static_cast<int>(c - 'A' + 10);
      if (digit < 0 || digits >= 8) return -1;
      value = value * 16 + digit;
      ++digits;
      ++pos_;
    }
    if (braced) {
      if (AtEnd()) return -1;
      ++pos_;
    }
    if (digits == 0 || (!braced && digits != count) || value > 0x10FFFF) return -1;
    return value;
  }

  // An escape that stands for one character (after the backslash). Returns -1 when the escape is
  // not a single-character one; the caller decides.
  Result<long> ParseCharEscape() {
    const char32_t c = Peek();
    switch (c) {
      case 'n': ++pos_; return long{'\n'};
      case 'r': ++pos_; return long{'\r'};
      case 't': ++pos_; return long{'\t'};
      case 'f': ++pos_; return long{'\f'};
      case 'v': ++pos_; return long{'\v'};
      case 'a': ++pos_; return long{'\a'};
      case 'e': ++pos_; return long{0x1B};
      case 'x': {
        ++pos_;
        const bool braced = !AtEnd() && Peek() == '{';
        if (braced) ++pos_;
        const long value = ReadHex(2, braced);
        if (value < 0) return Error("bad \\x escape");
        return value;
      }
      case 'u': {
        ++pos_;
        const long value = ReadHex(4, false);
        if (value < 0) return Error("bad \\u escape");
        return value;
      }
      default:
        break;
    }
    if (c < 128 && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) {
      ++pos_;
      return static_cast<long>(c);  // escaped punctuation or space
    }
    if (c >= 128) {
      ++pos_;
      return static_cast<long>(c);
    }
    return long{-1};
  }

  // \s \S \d \D \w \W \p \P as a class item; false when the escape is none of them.
  Result<bool> ParseClassEscape(ClassItem* item) {
    const char32_t c = Peek();
    switch (c) {
      case 's':
      case 'S':
        item->kind = ClassItem::Kind::kSpace;
        item->negated = c == 'S';
        ++pos_;
        return true;
      case 'w':
      case 'W':
        item->kind = ClassItem::Kind::kWord;
        item->negated = c == 'W';
        ++pos_;
        return true;
      case 'd':
      case 'D':
        item->kind = ClassItem::Kind::kCategories;
        item->categories = CategoryBit(GeneralCategory::kNd);
        item->negated = c == 'D';
        ++pos_;
        return true;
      case 'p':
      case 'P':
        ENVFORGE_RETURN_IF_ERROR(ParseProperty(c == 'P', item));
        return true;
      default:
        return false;
    }
  }

  int AddClass(CharClass cls) {
    cls.Finish();
    program_->classes.push_back(std::move(cls));
    return static_cast<int>(program_->classes.size() - 1);
  }

  std::unique_ptr<Node> ClassNode(CharClass cls) {
    auto node = MakeNode(Node::Kind::kClass);
    node->class_index = AddClass(std::move(cls));
    return node;
  }

  Result<std::unique_ptr<Node>> ParseBracketClass(bool fold) {
    ++pos_;  // '['
    CharClass cls;
    cls.fold = fold;
    if (!AtEnd() && Peek() == '^') {
      cls.negated = true;
      ++pos_;
    }
    bool first = true;
    while (true) {
      if (AtEnd()) return Error("missing ']'");
      char32_t c = Peek();
      if (c == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      if (c == '[') return Unsupported("nested class '['");
      if (c == '&' && Peek(1) == '&') return Unsupported("class intersection '&&'");
      long lo = -1;
      if (c == '\\') {
        ++pos_;
        if (AtEnd()) return Error("trailing backslash");
        ClassItem item;
        ENVFORGE_ASSIGN_OR_RETURN(bool is_class_escape, ParseClassEscape(&item));
        if (is_class_escape) {
          cls.items.push_back(item);
          continue;
        }
        ENVFORGE_ASSIGN_OR_RETURN(lo, ParseCharEscape());
        if (lo < 0) return Unsupported("escape '\\" + std::string(1, static_cast<char>(Peek())) + "' in a class");
      } else {
        lo = static_cast<long>(c);
        ++pos_;
      }
      long hi = lo;
      if (!AtEnd() && Peek() == '-' && Peek(1) != ']' && pos_ + 1 < size()) {
        ++pos_;
        const char32_t end_char = Peek();
        if (end_char == '\\') {
          ++pos_;
          if (AtEnd()) return Error("trailing backslash");
          ENVFORGE_ASSIGN_OR_RETURN(hi, ParseCharEscape());
          if (hi < 0) return Error("bad range end in a class");
        } else if (end_char == '[') {
          return Unsupported("nested class '['");
        } else {
          hi = static_cast<long>(end_char);
          ++pos_;
        }
        if (hi < lo) return Error("class range out of order");
      }
      ClassItem item;
      item.kind = ClassItem::Kind::kRange;
      item.lo = static_cast<char32_t>(lo);
      item.hi = static_cast<char32_t>(hi);
      cls.items.push_back(item);
    }
    return ClassNode(std::move(cls));
  }

  Result<std::unique_ptr<Node>> ParseAtom(bool fold) {
    const char32_t c = Peek();
    switch (c) {
      case '(':
        return ParseGroup(fold);
      case '[':
        return ParseBracketClass(fold);
      case '.': {
        ++pos_;
        return MakeNode(Node::Kind::kAny);
      }
      case '^':
        ++pos_;
        return MakeNode(Node::Kind::kLineStart);
      case '$':
        ++pos_;
        return MakeNode(Node::Kind::kLineEnd);
      case '*':
      case '+':
      case '?':
        return Error("quantifier without an operand");
      case '\\':
        return ParseEscapeAtom(fold);
      default:
        break;
    }
    ++pos_;
    auto node = MakeNode(Node::Kind::kChar);
    node->ch = c;
    node->fold = fold && AsciiSwapCase(c) != c;
    return node;
  }

  Result<std::unique_ptr<Node>> ParseEscapeAtom(bool fold) {
    ++pos_;  // backslash
    if (AtEnd()) return Error("trailing backslash");
    const char32_t c = Peek();
    switch (c) {
      case 'A':
        ++pos_;
        return MakeNode(Node::Kind::kTextStart);
      case 'z':
        ++pos_;
        return MakeNode(Node::Kind::kTextEnd);
      case 'Z':
        ++pos_;
        return MakeNode(Node::Kind::kTextEndBeforeNewline);
      case 'b':
      case 'B':
        return Unsupported(std::string("word boundary '\\") + static_cast<char>(c) + "'");
      case 'G':
      case 'K':
      case 'R':
      case 'X':
        return Unsupported(std::string("escape '\\") + static_cast<char>(c) + "'");
      default:
        break;
    }
    if (c >= '1' && c <= '9') return Unsupported("backreference '\\" + std::string(1, static_cast<char>(c)) + "'");
    ClassItem item;
    ENVFORGE_ASSIGN_OR_RETURN(bool is_class_escape, ParseClassEscape(&item));
    if (is_class_escape) {
      CharClass cls;
      cls.items.push_back(item);
      return ClassNode(std::move(cls));
    }
    ENVFORGE_ASSIGN_OR_RETURN(long value, ParseCharEscape());
    if (value < 0) return Unsupported("escape '\\" + std::string(1, static_cast<char>(c)) + "'");
    auto node = MakeNode(Node::Kind::kChar);
    node->ch = static_cast<char32_t>(value);
    node->fold = fold && AsciiSwapCase(node->ch) != node->ch;
    return node;
  }

  std::string_view pattern_;
  Regex::Program* program_;
  DecodedUtf8 decoded_;
  size_t pos_ = 0;
};

class Compiler {
 public:
  explicit Compiler(Regex::Program* program) : program_(program) {}

  int CompileProgram(const Node& root) {
    const int index = static_cast<int>(program_->programs.size());
    program_->programs.emplace_back();
    std::vector<Inst> code;
    Emit(root, &code);
    code.push_back(Inst{Op::kMatch});
    program_->programs[index] = std::move(code);
    return index;
  }

 private:
  static int Here(const std::vector<Inst>* code) { return static_cast<int>(code->size()); }

  void Emit(const Node& node, std::vector<Inst>* code) {
    switch (node.kind) {
      case Node::Kind::kEmpty:
        return;
      case Node::Kind::kChar:
        code->push_back(Inst{node.fold ? Op::kCharFold : Op::kChar, node.ch});
        return;
      case Node::Kind::kClass:
        code->push_back(Inst{Op::kClass, 0, node.class_index});
        return;
      case Node::Kind::kAny:
        code->push_back(Inst{Op::kAny});
        return;
      case Node::Kind::kLineStart:
        code->push_back(Inst{Op::kLineStart});
        return;
      case Node::Kind::kLineEnd:
        code->push_back(Inst{Op::kLineEnd});
        return;
      case Node::Kind::kTextStart:
        code->push_back(Inst{Op::kTextStart});
        return;
      case Node::Kind::kTextEnd:
        code->push_back(Inst{Op::kTextEnd});
        return;
      case Node::Kind::kTextEndBeforeNewline:
        code->push_back(Inst{Op::kTextEndBeforeNewline});
        return;
      case Node::Kind::kConcat:
        for (const auto& child : node.children) Emit(*child, code);
        return;
      case Node::Kind::kAlternate: {
        // split L1, next; L1: a; jump end; next: split L2, next2; ...
        std::vector<int> jumps;
        for (size_t i = 0; i < node.children.size(); ++i) {
          if (i + 1 < node.children.size()) {
            const int split = Here(code);
            code->push_back(Inst{Op::kSplit, 0, split + 1, 0});
            Emit(*node.children[i], code);
            jumps.push_back(Here(code));
            code->push_back(Inst{Op::kJump});
            (*code)[split].y = Here(code);
          } else {
            Emit(*node.children[i], code);
          }
        }
        for (int jump : jumps) (*code)[jump].x = Here(code);
        return;
      }
      case Node::Kind::kRepeat:
        EmitRepeat(node, code);
        return;
      case Node::Kind::kLookahead: {
        const int sub = CompileProgram(*node.children[0]);
        code->push_back(Inst{Op::kLookahead, 0, sub, node.negated ? 1 : 0});
        return;
      }
    }
  }

  // Emits a split preferring `body` (greedy) or the exit (lazy); returns its index so the exit
  // can be patched.
  int EmitSplit(bool greedy, std::vector<Inst>* code) {
    const int split = Here(code);
    code->push_back(Inst{Op::kSplit});
    if (greedy) {
      (*code)[split].x = split + 1;
    } else {
      (*code)[split].y = split + 1;
    }
    return split;
  }
  static void PatchExit(int split, bool greedy, int target, std::vector<Inst>* code) {
    if (greedy) {
      (*code)[split].y = target;
    } else {
      (*code)[split].x = target;
    }
  }

  void EmitRepeat(const Node& node, std::vector<Inst>* code) {
    const Node& body = *node.children[0];
    for (int i = 0; i < node.min; ++i) Emit(body, code);
    if (node.max == kUnbounded) {
      const int split = EmitSplit(node.greedy, code);
      Emit(body, code);
      code->push_back(Inst{Op::kJump, 0, split});
      PatchExit(split, node.greedy, Here(code), code);
      return;
    }
    std::vector<int> splits;
    for (int i = node.min; i < node.max; ++i) {
      splits.push_back(EmitSplit(node.greedy, code));
      Emit(body, code);
    }
    for (int split : splits) PatchExit(split, node.greedy, Here(code), code);
  }

  Regex::Program* program_;
};

bool IsNewline(char32_t cp) { return cp == '\n'; }

struct Thread {
  int pc;
  size_t pos;
};

// Runs programs[index] anchored at pos; returns the end of the first (highest-priority) match.
std::optional<size_t> Run(const Regex::Program& program, int index, std::span<const char32_t> text,
                          size_t pos, std::vector<Thread>* stack) {
  const std::vector<Inst>& code = program.programs[index];
  const size_t base = stack->size();
  stack->push_back(Thread{0, pos});
  std::optional<size_t> result;
  while (stack->size() > base && !result) {
    Thread thread = stack->back();
    stack->pop_back();
    int pc = thread.pc;
    size_t p = thread.pos;
    while (true) {
      const Inst& inst = code[pc];
      bool ok = true;
      switch (inst.op) {
        case Op::kChar:
          ok = p < text.size() && text[p] == inst.ch;
          if (ok) ++p, ++pc;
          break;
        case Op::kCharFold:
          ok = p < text.size() && (text[p] == inst.ch || text[p] == AsciiSwapCase(inst.ch));
          if (ok) ++p, ++pc;
          break;
        case Op::kClass:
          ok = p < text.size() && program.classes[inst.x].Matches(text[p]);
          if (ok) ++p, ++pc;
          break;
        case Op::kAny:
          ok = p < text.size() && !IsNewline(text[p]);
          if (ok) ++p, ++pc;
          break;
        case Op::kSplit:
          stack->push_back(Thread{inst.y, p});
          pc = inst.x;
          break;
        case Op::kJump:
          pc = inst.x;
          break;
        case Op::kLookahead: {
          const bool found = Run(program, inst.x, text, p, stack).has_value();
          ok = found != (inst.y != 0);
          if (ok) ++pc;
          break;
        }
        case Op::kLineStart:
          ok = p == 0 || IsNewline(text[p - 1]);
          if (ok) ++pc;
          break;
        case Op::kLineEnd:
          ok = p == text.size() || IsNewline(text[p]);
          if (ok) ++pc;
          break;
        case Op::kTextStart:
          ok = p == 0;
          if (ok) ++pc;
          break;
        case Op::kTextEnd:
          ok = p == text.size();
          if (ok) ++pc;
          break;
        case Op::kTextEndBeforeNewline:
          ok = p == text.size() || (p + 1 == text.size() && IsNewline(text[p]));
          if (ok) ++pc;
          break;
        case Op::kMatch:
          result = p;
          break;
      }
      if (!ok || result) break;
    }
  }
  stack->resize(base);
  return result;
}

}  // namespace

Regex::Regex(std::shared_ptr<const Program> program) : program_(std::move(program)) {}

Result<Regex> Regex::Compile(std::string_view pattern) {
  auto program = std::make_shared<Program>();
  program->pattern = std::string(pattern);
  Parser parser(pattern, program.get());
  ENVFORGE_ASSIGN_OR_RETURN(auto root, parser.ParseAll());
  Compiler compiler(program.get());
  compiler.CompileProgram(*root);
  return Regex(std::move(program));
}

std::optional<Regex::Match> Regex::Find(std::span<const char32_t> text, size_t from) const {
  thread_local std::vector<Thread> stack;
  for (size_t start = from; start <= text.size(); ++start) {
    if (auto end = Run(*program_, 0, text, start, &stack)) return Match{start, *end};
  }
  return std::nullopt;
}

const std::string& Regex::pattern() const { return program_->pattern; }

}  // namespace envforge::inference::internal
