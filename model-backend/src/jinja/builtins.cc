#include "builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <random>

#include "bounds.h"
#include "methods.h"
#include "filter_util.h"
#include "markup_filters.h"
#include "sequence_filters.h"
#include "text_filters.h"

namespace sinew::jinja {
namespace {

using FilterFn = Value (*)(const Value&, const CallArgs&);
using TestFn = bool (*)(const Value&, const CallArgs&);

size_t Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return DecodeUtf8(v.str()).size();
    case Value::Kind::kList:
      if (v.is_generator()) Fail("object of type 'generator' has no len()");
      return v.list().items.size();
    case Value::Kind::kDict:
      return v.dict().items.size();
    default:
      Fail("object of type '" + v.TypeName() + "' has no len()");
  }
}

Value FilterTojson(const Value& v, const CallArgs& args) {
  const Value indent = args.GetOr(1, "indent", Value::None());
  const Value sort_keys = args.GetOr(4, "sort_keys", Value(false));
  if (Arg(args, 3, "separators") != nullptr && !Arg(args, 3, "separators")->is_none()) {
    Fail("tojson: separators are not supported");
  }
  return Value(v.ToJson(indent.is_none() ? -1 : static_cast<int>(indent.int_value()), sort_keys.Truthy()));
}

Value FilterTrim(const Value& v, const CallArgs& args) {
  const Value* chars = Arg(args, 0, "chars");
  return Same(v, PyStrip(v.Str(), chars && !chars->is_none() ? chars->str() : std::string(), true, true,
                             chars && !chars->is_none()));
}
Value FilterLength(const Value& v, const CallArgs&) { return Value(static_cast<int64_t>(Length(v))); }
Value FilterItems(const Value& v, const CallArgs&) {
  if (v.is_undefined()) return Value::Generator({});
  if (v.kind() != Value::Kind::kDict) Fail("items(): can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [key, value] : v.dict().items) out.push_back(Value::List({Value(key), value}, true));
  return Value::Generator(std::move(out));
}
Value FilterLower(const Value& v, const CallArgs&) { return Same(v, PyLower(v.Str())); }
Value FilterUpper(const Value& v, const CallArgs&) { return Same(v, PyUpper(v.Str())); }
Value FilterCapitalize(const Value& v, const CallArgs&) { return Value(PyCapitalize(v.Str())); }
Value FilterSafe(const Value& v, const CallArgs&) { return v.is_markup() ? v : Value::Markup(v.Str()); }
Value FilterEscape(const Value& v, const CallArgs&) { return v.is_markup() ? v : Value::Markup(HtmlEscape(v.Str())); }
Value FilterString(const Value& v, const CallArgs&) { return v.is_markup() ? v : Value(v.Str()); }
Value FilterList(const Value& v, const CallArgs&) { return Value::List(v.Items()); }
Value FilterFirst(const Value& v, const CallArgs&) {
  std::vector<Value> items = v.Items();
  return items.empty() ? Value::Undefined("first") : items.front();
}
Value FilterLast(const Value& v, const CallArgs&) {
  std::vector<Value> items = v.Items();
  return items.empty() ? Value::Undefined("last") : items.back();
}
Value FilterDefault(const Value& v, const CallArgs& args) {
  const Value fallback = args.GetOr(0, "default_value", Value(""));
  const bool boolean = args.GetOr(1, "boolean", Value(false)).Truthy();
  if (v.is_undefined() || (boolean && !v.Truthy())) return fallback;
  return v;
}
Value FilterJoin(const Value& v, const CallArgs& args) {
  const std::string sep = args.GetOr(0, "d", Value("")).Str();
  const Value* attribute = Arg(args, 1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : v.Items()) {
    if (!first) out += sep;
    first = false;
    out += (attribute && !attribute->is_none() ? Attribute(item, attribute->Str()) : item).Str();
    CheckTextSize(out.size());
  }
  return Value(out);
}
Value FilterReplace(const Value& v, const CallArgs& args) {
  const Value count = args.GetOr(2, "count", Value::None());
  return Value(PyReplace(v.Str(), Required(args, 0, "old", "replace").Str(),
                         Required(args, 1, "new", "replace").Str(), count.is_none() ? -1 : count.int_value()));
}
Value FilterIndent(const Value& v, const CallArgs& args) {
  const Value width = args.GetOr(0, "width", Value(4));
  if (!width.is_string() && width.int_value() > 0) CheckTextSize(static_cast<size_t>(width.int_value()));
  const std::string indent =
      width.is_string() ? width.str() : std::string(static_cast<size_t>(std::max<int64_t>(width.int_value(), 0)), ' ');
  const bool first = args.GetOr(1, "first", Value(false)).Truthy();
  const bool blank = args.GetOr(2, "blank", Value(false)).Truthy();
  std::vector<std::string> lines = PySplitLines(v.Str() + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n" + ((blank || !lines[i].empty()) ? indent : "");
    out += lines[i];
    CheckTextSize(out.size());
  }
  return Value(first ? indent + out : out);
}
Value FilterInt(const Value& v, const CallArgs& args) {
  const Value fallback = args.GetOr(0, "default", Value(0));
  if (v.kind() == Value::Kind::kFloat) return Value(static_cast<int64_t>(v.float_value()));
  if (v.is_number()) return Value(v.int_value());
  if (v.is_string()) {
    try {
      size_t used = 0;
      const std::string s = PyStrip(v.str(), "", true, true, false);
      const int64_t i = std::stoll(s, &used);
      if (used == s.size()) return Value(i);
      const double d = std::stod(s, &used);
      if (used == s.size()) return Value(static_cast<int64_t>(d));
    } catch (const std::exception&) {
    }
  }
  return fallback;
}
Value FilterFloat(const Value& v, const CallArgs& args) {
  if (v.is_number()) return Value(v.float_value());
  if (v.is_string()) {
    try {
      size_t used = 0;
      const double d = std::stod(v.str(), &used);
      if (used == v.str().size()) return Value(d);
    } catch (const std::exception&) {
    }
  }
  return args.GetOr(0, "default", Value(0.0));
}
Value FilterAbs(const Value& v, const CallArgs&) {
  if (v.kind() == Value::Kind::kFloat) return Value(std::fabs(v.float_value()));
  if (v.is_number()) return Value(v.int_value() < 0 ? NegInt(v.int_value()) : v.int_value());
  Fail("bad operand type for abs(): '" + v.TypeName() + "'");
}
Value FilterReverse(const Value& v, const CallArgs&) {
  if (v.is_string()) {
    std::u32string s = DecodeUtf8(v.str());
    std::reverse(s.begin(), s.end());
    return Value(EncodeUtf8(s));
  }
  std::vector<Value> items = v.Items();
  std::reverse(items.begin(), items.end());
  return Value::Generator(std::move(items));
}
Value FilterTitle(const Value& v, const CallArgs&) { return Value(PyTitle(v.Str())); }
// Python's round(x, n) of a float: correctly rounded, halves to even (printf's rounding
// of the exact binary value is the same).
double RoundFloat(double x, int64_t n) {
  if (!std::isfinite(x) || n > 400) return x;
  char buf[512];
  if (n >= 0) {
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(n), x);
    return std::strtod(buf, nullptr);
  }
  if (x == 0 || n < -400) return std::copysign(0.0, x);
  std::snprintf(buf, sizeof buf, "%.16e", x);  // x's decimal exponent
  const int64_t exponent = std::strtoll(std::strchr(buf, 'e') + 1, nullptr, 10);
  const int64_t keep = exponent + 1 + n;  // significant digits left of 10^-n
  if (keep <= 0) {
    const double unit = std::strtod(("1e" + std::to_string(-n)).c_str(), nullptr);
    return std::copysign(keep == 0 && std::fabs(x) > unit / 2 ? unit : 0.0, x);
  }
  std::snprintf(buf, sizeof buf, "%.*e", static_cast<int>(keep - 1), x);
  return std::strtod(buf, nullptr);
}

Value FilterRound(const Value& v, const CallArgs& args) {
  const int64_t precision = args.GetOr(0, "precision", Value(0)).int_value();
  const std::string method = args.GetOr(1, "method", Value("common")).Str();
  if (method != "common" && method != "ceil" && method != "floor") Fail("method must be common, ceil or floor");
  if (!v.is_number()) Fail("type " + v.TypeName() + " doesn't define __round__ method");
  if (method == "common") {
    if (v.kind() == Value::Kind::kFloat) return Value(RoundFloat(v.float_value(), precision));
    // round(int, n) is an int: exact, halves to even.
    const int64_t i = v.int_value();
    if (precision >= 0) return Value(i);
    if (precision < -18) return Value(int64_t{0});
    int64_t unit = 1;
    for (int64_t k = 0; k < -precision; ++k) unit *= 10;
    int64_t q = i / unit, r = i % unit;
    if (r < 0) {
      r += unit;
      --q;
    }
    if (r * 2 > unit || (r * 2 == unit && q % 2 != 0)) ++q;
    return Value(MulInts(q, unit));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.float_value() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}
Value FilterAttr(const Value& v, const CallArgs& args) { return GetAttr(v, Required(args, 0, "name", "attr").Str()); }

const std::map<std::string, FilterFn, std::less<>>& Filters() {
  static const std::map<std::string, FilterFn, std::less<>> kFilters = {
      {"tojson", FilterTojson},       {"trim", FilterTrim},         {"length", FilterLength},
      {"count", FilterLength},        {"items", FilterItems},       {"lower", FilterLower},
      {"upper", FilterUpper},         {"capitalize", FilterCapitalize}, {"title", FilterTitle},
      {"safe", FilterSafe},           {"escape", FilterEscape},    {"e", FilterEscape},       {"string", FilterString},     {"list", FilterList},
      {"first", FilterFirst},         {"last", FilterLast},         {"default", FilterDefault},
      {"d", FilterDefault},           {"join", FilterJoin},         {"replace", FilterReplace},
      {"indent", FilterIndent},       {"int", FilterInt},           {"float", FilterFloat},
      {"abs", FilterAbs},             {"reverse", FilterReverse},   {"unique", FilterUnique},
      {"sort", FilterSort},           {"sum", FilterSum},           {"select", FilterSelect},
      {"reject", FilterReject},       {"selectattr", FilterSelectAttr}, {"rejectattr", FilterRejectAttr},
      {"map", FilterMap},             {"round", FilterRound},       {"attr", FilterAttr},
      {"dictsort", FilterDictsort},   {"groupby", FilterGroupby},   {"batch", FilterBatch},
      {"slice", FilterSlice},         {"min", FilterMin},           {"max", FilterMax},
      {"random", FilterRandom},       {"center", FilterCenter},     {"truncate", FilterTruncate},
      {"wordwrap", FilterWordwrap},   {"wordcount", FilterWordcount}, {"filesizeformat", FilterFilesizeformat},
      {"format", FilterFormat},       {"striptags", FilterStriptags}, {"forceescape", FilterForceescape},
      {"urlencode", FilterUrlencode}, {"urlize", FilterUrlize},     {"xmlattr", FilterXmlattr},
      {"pprint", FilterPprint},
  };
  return kFilters;
}

bool TestDefined(const Value& v, const CallArgs&) { return !v.is_undefined(); }
bool TestUndefined(const Value& v, const CallArgs&) { return v.is_undefined(); }
bool TestNone(const Value& v, const CallArgs&) { return v.is_none(); }
bool TestBoolean(const Value& v, const CallArgs&) { return v.kind() == Value::Kind::kBool; }
bool TestTrue(const Value& v, const CallArgs&) { return v.kind() == Value::Kind::kBool && v.bool_value(); }
bool TestFalse(const Value& v, const CallArgs&) { return v.kind() == Value::Kind::kBool && !v.bool_value(); }
bool TestInteger(const Value& v, const CallArgs&) { return v.kind() == Value::Kind::kInt; }
bool TestFloat(const Value& v, const CallArgs&) { return v.kind() == Value::Kind::kFloat; }
bool TestNumber(const Value& v, const CallArgs&) { return v.is_number(); }
bool TestString(const Value& v, const CallArgs&) { return v.is_string(); }
bool TestMapping(const Value& v, const CallArgs&) { return v.kind() == Value::Kind::kDict; }
bool TestIterable(const Value& v, const CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.kind() == Value::Kind::kDict;
}
bool TestSequence(const Value& v, const CallArgs& a) { return TestIterable(v, a) && !v.is_generator(); }
bool TestCallable(const Value& v, const CallArgs&) { return v.kind() == Value::Kind::kFunction; }
bool TestOdd(const Value& v, const CallArgs&) { return v.int_value() % 2 != 0; }
bool TestEven(const Value& v, const CallArgs&) { return v.int_value() % 2 == 0; }
bool TestDivisibleBy(const Value& v, const CallArgs& a) {
  const int64_t d = Required(a, 0, "num", "divisibleby").int_value();
  if (d == 0) Fail("integer division or modulo by zero");
  return v.int_value() % d == 0;
}
bool TestEq(const Value& v, const CallArgs& a) { return v.Equals(Required(a, 0, "other", "eq")); }
bool TestNe(const Value& v, const CallArgs& a) { return !v.Equals(Required(a, 0, "other", "ne")); }
bool TestLt(const Value& v, const CallArgs& a) { return v.Less(Required(a, 0, "other", "lt")); }
bool TestGt(const Value& v, const CallArgs& a) { return Required(a, 0, "other", "gt").Less(v); }
bool TestLe(const Value& v, const CallArgs& a) { return !Required(a, 0, "other", "le").Less(v); }
bool TestGe(const Value& v, const CallArgs& a) { return !v.Less(Required(a, 0, "other", "ge")); }
bool TestIn(const Value& v, const CallArgs& a) { return Contains(Required(a, 0, "seq", "in"), v); }
bool TestSameAs(const Value& v, const CallArgs& a) {
  const Value& o = Required(a, 0, "other", "sameas");
  if (v.kind() != o.kind()) return false;
  if (v.is_none() || v.is_undefined()) return true;
  if (v.kind() == Value::Kind::kBool) return v.bool_value() == o.bool_value();
  return v.Equals(o) && !v.is_list() && !v.is_mapping();
}
bool TestLower(const Value& v, const CallArgs&) { return PyIsLower(v.Str()); }  // str(value).islower()
bool TestUpper(const Value& v, const CallArgs&) { return PyIsUpper(v.Str()); }
bool TestEscaped(const Value& v, const CallArgs&) { return v.is_markup(); }
// `name in env.filters`: a list or dict is not hashable.
void CheckHashable(const Value& v) {
  if ((v.is_list() && !v.list().tuple) || v.is_mapping()) Fail("unhashable type: '" + v.TypeName() + "'");
}
bool TestFilter(const Value& v, const CallArgs&) {
  CheckHashable(v);
  return v.is_string() && HasFilter(v.str());
}
bool TestTest(const Value& v, const CallArgs&) {
  CheckHashable(v);
  return v.is_string() && HasTest(v.str());
}

const std::map<std::string, TestFn, std::less<>>& Tests() {
  static const std::map<std::string, TestFn, std::less<>> kTests = {
      {"defined", TestDefined},   {"undefined", TestUndefined}, {"none", TestNone},
      {"boolean", TestBoolean},   {"true", TestTrue},           {"false", TestFalse},
      {"integer", TestInteger},   {"float", TestFloat},         {"number", TestNumber},
      {"string", TestString},     {"mapping", TestMapping},     {"iterable", TestIterable},
      {"sequence", TestSequence}, {"callable", TestCallable},   {"odd", TestOdd},
      {"even", TestEven},         {"divisibleby", TestDivisibleBy}, {"eq", TestEq},
      {"equalto", TestEq},        {"==", TestEq},               {"ne", TestNe},
      {"!=", TestNe},             {"lt", TestLt},               {"lessthan", TestLt},
      {"<", TestLt},              {"gt", TestGt},               {"greaterthan", TestGt},
      {">", TestGt},              {"le", TestLe},               {"<=", TestLe},
      {"ge", TestGe},             {">=", TestGe},               {"in", TestIn},
      {"sameas", TestSameAs},     {"lower", TestLower},         {"upper", TestUpper},
      {"escaped", TestEscaped},   {"filter", TestFilter},       {"test", TestTest},
  };
  return kTests;
}

}  // namespace

bool HasFilter(std::string_view name) { return Filters().count(name) > 0; }
bool HasTest(std::string_view name) { return Tests().count(name) > 0; }

Value ApplyFilter(const std::string& name, const Value& input, const CallArgs& args) {
  auto it = Filters().find(name);
  if (it == Filters().end()) Fail("no filter named '" + name + "'");
  return it->second(input, args);
}

bool ApplyTest(const std::string& name, const Value& input, const CallArgs& args) {
  auto it = Tests().find(name);
  if (it == Tests().end()) Fail("no test named '" + name + "'");
  return it->second(input, args);
}

void AddGlobals(DictData& globals, std::chrono::system_clock::time_point now) {
  globals.Set("raise_exception", Value::Func("raise_exception", [](CallArgs& args) -> Value {
                const Value* message = args.Get(0, "message");
                Fail(message ? message->Str() : "raise_exception called");
              }));
  globals.Set("strftime_now", Value::Func("strftime_now", [now](CallArgs& args) -> Value {
                const std::string format = Required(args, 0, "format", "strftime_now").Str();
                const std::time_t t = std::chrono::system_clock::to_time_t(now);
                std::tm tm{};
                localtime_r(&t, &tm);
                char buf[256];
                const size_t n = std::strftime(buf, sizeof buf, format.c_str(), &tm);
                return Value(std::string(buf, n));
              }));
  globals.Set("range", Value::Func("range", [](CallArgs& args) -> Value {
                if (args.positional.empty() || args.positional.size() > 3) Fail("range expects 1 to 3 arguments");
                int64_t start = 0, stop = 0, step = 1;
                if (args.positional.size() == 1) {
                  stop = args.positional[0].int_value();
                } else {
                  start = args.positional[0].int_value();
                  stop = args.positional[1].int_value();
                  if (args.positional.size() == 3) step = args.positional[2].int_value();
                }
                if (step == 0) Fail("range() arg 3 must not be zero");
                std::vector<Value> out;
                for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
                  out.emplace_back(i);
                  if (out.size() > 100000) Fail("range too big");
                  if (__builtin_add_overflow(i, step, &i)) break;  // past int64: past stop too
                }
                return Value::List(std::move(out));
              }));
  auto make_mapping = [](bool is_namespace) {
    return [is_namespace](CallArgs& args) -> Value {
      Value out = is_namespace ? Value::Namespace() : Value::Dict();
      for (const Value& positional : args.positional) {
        if (positional.kind() != Value::Kind::kDict) Fail("expected a mapping argument");
        for (const auto& [key, value] : positional.dict().items) out.dict().Set(key, value);
      }
      for (const auto& [key, value] : args.keyword) out.dict().Set(key, value);
      return out;
    };
  };
  globals.Set("namespace", Value::Func("namespace", make_mapping(true)));
  globals.Set("dict", Value::Func("dict", make_mapping(false)));
}

}  // namespace sinew::jinja
