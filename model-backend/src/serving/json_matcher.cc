#include "json_matcher.h"

#include <algorithm>

namespace sinew::model {
namespace {

using Kind = SchemaNode::Kind;
constexpr int32_t kDone = 9;          // stage of a finished object/array/string
constexpr size_t kMaxNumberDigits = 15;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

size_t Digits(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), IsDigit));
}

// Object helpers: property j may come next if no required one is skipped.
bool Reachable(const SchemaNode& n, int32_t from, size_t j) {
  if (j < static_cast<size_t>(from) || j >= n.names.size()) return false;
  for (size_t k = static_cast<size_t>(from); k < j; ++k) {
    if (n.required[k]) return false;
  }
  return true;
}
bool RequiredRemain(const SchemaNode& n, int32_t from) {
  for (size_t k = static_cast<size_t>(from); k < n.required.size(); ++k) {
    if (n.required[k]) return true;
  }
  return false;
}

}  // namespace

JsonMatcher::JsonMatcher(std::shared_ptr<const JsonSchema> schema) : schema_(std::move(schema)) {
  Push({}, schema_->root(), stacks_);
}

void JsonMatcher::Push(Stack stack, int32_t node, std::vector<Stack>& out) const {
  const SchemaNode& n = schema_->node(node);
  if (n.kind == Kind::kAnyOf) {
    for (int32_t option : n.children) Push(stack, option, out);
    return;
  }
  Frame f;
  f.node = node;
  stack.push_back(std::move(f));
  out.push_back(std::move(stack));
}

bool JsonMatcher::CanEnd(const Frame& f) const {
  const SchemaNode& n = schema_->node(f.node);
  switch (n.kind) {
    case Kind::kLiterals:
      return std::find(n.literals.begin(), n.literals.end(), f.buf) != n.literals.end();
    case Kind::kNumber:
    case Kind::kInteger:
      return f.stage == 2 || f.stage == 3 || f.stage == 5 || f.stage == 8;
    default:
      return f.stage == kDone;
  }
}

bool JsonMatcher::FeedTop(Stack stack, char c, std::vector<Stack>& out) const {
  Frame& f = stack.back();
  const SchemaNode& n = schema_->node(f.node);
  switch (n.kind) {
    case Kind::kLiterals: {
      const std::string next = f.buf + c;
      for (const std::string& lit : n.literals) {
        if (lit.starts_with(next)) {
          f.buf = next;
          out.push_back(std::move(stack));
          return true;
        }
      }
      return false;
    }
    case Kind::kString: {
      const bool room = f.index < n.max_count;
      if (f.stage == 0 && c == '"') {
        f.stage = 1;
      } else if (f.stage == 1 && c == '"' && f.index >= n.min_count) {
        f.stage = kDone;
      } else if (f.stage == 1 && c == '\\' && room) {
        f.stage = 2;
      } else if (f.stage == 1 && c >= 0x20 && c <= 0x7e && c != '"' && c != '\\' && room) {
        ++f.index;
      } else if (f.stage == 2 && (c == '"' || c == '\\' || c == 'n' || c == 't')) {
        f.stage = 1;
        ++f.index;
      } else {
        return false;
      }
      out.push_back(std::move(stack));
      return true;
    }
    case Kind::kNumber:
    case Kind::kInteger: {
      const bool real = n.kind == Kind::kNumber;
      const bool digit = IsDigit(c);
      const bool more = Digits(f.buf) < kMaxNumberDigits;
      int32_t next = -1;
      switch (f.stage) {
        case 0: next = c == '-' ? 1 : c == '0' ? 3 : digit ? 2 : -1; break;
        case 1: next = c == '0' ? 3 : digit ? 2 : -1; break;
        case 2: next = digit && more ? 2 : real && c == '.' ? 4 : real && (c == 'e' || c == 'E') ? 6 : -1; break;
        case 3: next = real && c == '.' ? 4 : real && (c == 'e' || c == 'E') ? 6 : -1; break;
        case 4: next = digit && more ? 5 : -1; break;
        case 5: next = digit && more ? 5 : (c == 'e' || c == 'E') ? 6 : -1; break;
        case 6: next = c == '+' || c == '-' ? 7 : digit ? 8 : -1; break;
        case 7: next = digit ? 8 : -1; break;
        case 8: next = digit && Digits(f.buf.substr(f.buf.find_first_of("eE"))) < 2 ? 8 : -1; break;
        default: break;
      }
      if (next < 0) return false;
      f.stage = next;
      f.buf += c;
      out.push_back(std::move(stack));
      return true;
    }
    case Kind::kObject: {
      if (f.stage == 0 && c == '{') {
        f.stage = 1;
      } else if ((f.stage == 1 || f.stage == 4) && c == '}' && !RequiredRemain(n, f.index)) {
        f.stage = kDone;
      } else if (f.stage == 1 && c == '"' && static_cast<size_t>(f.index) < n.names.size()) {
        f.stage = 2;
        f.buf.clear();
      } else if (f.stage == 4 && c == ',' && static_cast<size_t>(f.index) < n.names.size()) {
        f.stage = 5;
      } else if (f.stage == 5 && c == '"') {
        f.stage = 2;
        f.buf.clear();
      } else if (f.stage == 2) {
        bool ok = false;
        const std::string next = f.buf + c;
        for (size_t j = 0; j < n.names.size() && !ok; ++j) {
          if (!Reachable(n, f.index, j)) continue;
          if (c == '"' && n.names[j] == f.buf) {
            f.chosen = static_cast<int32_t>(j);
            f.stage = 3;
            ok = true;
          } else if (n.names[j].starts_with(next)) {
            f.buf = next;
            ok = true;
          }
        }
        if (!ok) return false;
      } else if (f.stage == 3 && c == ':') {
        f.stage = 4;
        f.index = f.chosen + 1;
        f.buf.clear();
        const int32_t child = n.children[static_cast<size_t>(f.chosen)];
        Push(std::move(stack), child, out);
        return true;
      } else {
        return false;
      }
      out.push_back(std::move(stack));
      return true;
    }
    case Kind::kArray: {
      if (f.stage == 0 && c == '[') {
        f.stage = 1;
      } else if ((f.stage == 1 || f.stage == 2) && c == ']' && f.index >= n.min_count) {
        f.stage = kDone;
      } else if (f.stage == 2 && c == ',' && f.index < n.max_count) {
        f.stage = 3;
      } else if ((f.stage == 1 || f.stage == 3) && f.index < n.max_count) {
        f.stage = 2;
        ++f.index;
        std::vector<Stack> pushed;
        Push(std::move(stack), n.items, pushed);
        bool any = false;
        for (Stack& s : pushed) any |= FeedTop(std::move(s), c, out);
        return any;
      } else {
        return false;
      }
      out.push_back(std::move(stack));
      return true;
    }
    case Kind::kAnyOf:
      return false;  // expanded by Push, never on a stack
  }
  return false;
}

void JsonMatcher::Step(const Stack& stack, char c, std::vector<Stack>& out) const {
  if (stack.empty()) return;
  FeedTop(stack, c, out);
  if (CanEnd(stack.back()) && stack.size() > 1) {
    Stack parent(stack.begin(), stack.end() - 1);
    Step(parent, c, out);
  }
}

bool JsonMatcher::Feed(char c) {
  std::vector<Stack> next;
  for (const Stack& s : stacks_) Step(s, c, next);
  if (next.empty()) return false;
  std::vector<Stack> unique;
  for (Stack& s : next) {
    if (std::find(unique.begin(), unique.end(), s) == unique.end()) unique.push_back(std::move(s));
  }
  stacks_ = std::move(unique);
  return true;
}

bool JsonMatcher::FeedAll(std::string_view text) {
  std::vector<Stack> saved = stacks_;
  for (char c : text) {
    if (!Feed(c)) {
      stacks_ = std::move(saved);
      return false;
    }
  }
  return true;
}

bool JsonMatcher::Complete() const {
  return std::any_of(stacks_.begin(), stacks_.end(),
                     [this](const Stack& s) { return s.size() == 1 && CanEnd(s.back()); });
}

bool JsonMatcher::CanTake(const Stack& stack) const {
  std::vector<Stack> out;
  for (int c = 0x20; c <= 0x7e; ++c) {
    Step(stack, static_cast<char>(c), out);
    if (!out.empty()) return true;
  }
  return false;
}

bool JsonMatcher::CanContinue() const {
  return std::any_of(stacks_.begin(), stacks_.end(), [this](const Stack& s) { return CanTake(s); });
}

}  // namespace sinew::model
