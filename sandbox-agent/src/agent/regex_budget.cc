#include "agent/regex_budget.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>
#include <string>

namespace sinew::sandbox {
namespace {

// Past this every count is "too big"; keeps the arithmetic finite.
constexpr double kSaturate = 1e12;

RegexCost Add(RegexCost a, RegexCost b) {
  return {std::min(a.nodes + b.nodes, kSaturate), std::min(a.optional + b.optional, kSaturate),
          std::max(a.depth, b.depth)};
}

struct Interval {
  double min = 0;
  std::optional<double> max;  // nullopt: unbounded, {m,}
  size_t length = 0;          // characters from '{' through '}'
};

// "{m}", "{m,}", "{m,n}", "{,n}" at `at` (which holds '{'); nullopt when it is not an
// interval, which glibc then reads as a literal or refuses.
std::optional<Interval> ParseInterval(std::string_view p, size_t at) {
  size_t i = at + 1;
  auto number = [&](double& out) {
    size_t start = i;
    out = 0;
    while (i < p.size() && std::isdigit(static_cast<unsigned char>(p[i]))) {
      out = std::min(out * 10 + (p[i] - '0'), kSaturate);
      ++i;
    }
    return i > start;
  };
  Interval iv;
  double lo = 0, hi = 0;
  bool has_lo = number(lo);
  iv.min = lo;
  if (i < p.size() && p[i] == ',') {
    ++i;
    if (number(hi)) iv.max = hi;
    else if (!has_lo) return std::nullopt;
  } else {
    if (!has_lo) return std::nullopt;
    iv.max = lo;
  }
  if (i >= p.size() || p[i] != '}') return std::nullopt;
  iv.length = i + 1 - at;
  return iv;
}

// Index just past the bracket expression that starts at `at` ('['), or p.size() when it
// never closes.
size_t SkipBracket(std::string_view p, size_t at) {
  size_t i = at + 1;
  if (i < p.size() && p[i] == '^') ++i;
  if (i < p.size() && p[i] == ']') ++i;  // a leading ']' is a member
  while (i < p.size() && p[i] != ']') {
    if (p[i] == '[' && i + 1 < p.size() &&
        (p[i + 1] == ':' || p[i + 1] == '.' || p[i + 1] == '=')) {
      char kind = p[i + 1];
      size_t close = p.find(std::string{kind, ']'}, i + 2);
      if (close == std::string_view::npos) return p.size();
      i = close + 2;
      continue;
    }
    ++i;
  }
  return std::min(i + 1, p.size());
}

RegexCost Repeat(RegexCost e, double min, std::optional<double> max) {
  // glibc writes E{m,n} as m copies of E and n-m optional ones, E{m,} as m copies and one
  // starred copy (so E+ is E E*). Mandatory copies keep their own optional nodes; every
  // node of an optional copy is optional.
  double optional_copies = max ? std::max(*max - min, 0.0) : 1.0;
  double copies = std::max(min + optional_copies, 1.0);
  RegexCost out;
  out.nodes = std::min(e.nodes * copies + 1, kSaturate);
  out.optional = std::min(e.optional * min + e.nodes * optional_copies, kSaturate);
  out.depth = e.depth;
  return out;
}

class Estimator {
 public:
  explicit Estimator(std::string_view p) : p_(p) {}

  // The whole pattern. A ')' with no '(' ends Alternation early; glibc reads it as a
  // literal, so go on after it.
  RegexCost All() {
    RegexCost total = Alternation();
    while (i_ < p_.size()) {
      ++i_;  // the stray ')'
      total = Add(total, Add({1, 0}, Alternation()));
    }
    return total;
  }

 private:
  // A sequence of branches up to ')' or the end.
  RegexCost Alternation() {
    RegexCost total;
    for (;;) {
      total = Add(total, Branch());
      if (i_ < p_.size() && p_[i_] == '|') {
        ++i_;
        continue;
      }
      return total;
    }
  }

  RegexCost Branch() {
    RegexCost done;
    std::optional<RegexCost> last;  // the item a quantifier applies to
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
      char c = p_[i_];
      if (last && (c == '*' || c == '?')) {
        last = Repeat(*last, 0, c == '?' ? std::optional<double>(1) : std::nullopt);
        ++i_;
        continue;
      }
      if (last && c == '+') {
        last = Repeat(*last, 1, std::nullopt);
        ++i_;
        continue;
      }
      if (last && c == '{') {
        if (auto iv = ParseInterval(p_, i_)) {
          last = Repeat(*last, iv->min, iv->max);
          i_ += iv->length;
          continue;
        }
      }
      if (last) done = Add(done, *last);
      last = Atom();
    }
    if (last) done = Add(done, *last);
    return done;
  }

  RegexCost Atom() {
    char c = p_[i_];
    if (c == '\\') {
      i_ = std::min(i_ + 2, p_.size());
    } else if (c == '[') {
      i_ = SkipBracket(p_, i_);
    } else if (c == '(') {
      if (depth_ > kMaxRegexDepth) {  // refused anyway: no deeper recursion here either
        i_ = p_.size();
        return {1, 0, depth_};
      }
      ++i_;
      ++depth_;
      RegexCost inner = Alternation();
      --depth_;
      if (i_ < p_.size() && p_[i_] == ')') ++i_;
      inner.depth = std::max(inner.depth, depth_ + 1);
      return Add(inner, {1, 0});
    } else {
      ++i_;
    }
    return {1, 0};
  }

  std::string_view p_;
  size_t i_ = 0;
  size_t depth_ = 0;  // groups open at i_
};

std::string Count(double v) {
  if (v >= kSaturate) return "more than 10^12";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f", v);
  return buf;
}

}  // namespace

RegexCost EstimateExtendedRegexCost(std::string_view pattern) {
  return Estimator(pattern).All();
}

Status CheckExtendedRegexBudget(std::string_view pattern) {
  RegexCost cost = EstimateExtendedRegexCost(pattern);
  if (cost.depth > kMaxRegexDepth) {
    return Status::InvalidArgument("pattern nests groups more than " + std::to_string(kMaxRegexDepth) +
                                   " deep; the regular expression compiler cannot take that");
  }
  if (cost.nodes <= kMaxRegexNodes && cost.optional <= kMaxRegexOptional) return Status::Ok();
  return Status::InvalidArgument(
      "pattern is too large to compile: its repetitions expand to about " + Count(cost.nodes) +
      " nodes (at most " + Count(kMaxRegexNodes) + "), " + Count(cost.optional) +
      " of them optional (at most " + Count(kMaxRegexOptional) +
      "); use smaller {m,n} bounds and do not stack repetitions like a++");
}

}  // namespace sinew::sandbox
