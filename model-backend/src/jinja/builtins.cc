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
#include "markup_filters.h"
#include "text_filters.h"

namespace sinew::jinja {
namespace {

using FilterFn = Value (*)(const Value&, const CallArgs&);
using TestFn = bool (*)(const Value&, const CallArgs&);

const Value* Arg(const CallArgs& args, size_t index, std::string_view name) { return args.Get(index, name); }

const Value& Required(const CallArgs& args, size_t index, std::string_view name, std::string_view what) {
  const Value* v = args.Get(index, name);
  if (v == nullptr) Fail(std::string(what) + "() missing required argument '" + std::string(name) + "'");
  return *v;
}

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

// Jinja's make_attrgetter: "a.b" looks up each part with getitem.
Value Attribute(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    const std::optional<int64_t> index = digits ? ParseDecimalInt64(part) : std::nullopt;
    v = GetItem(v, index ? Value(*index) : Value(part));  // an index past int64: by name
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

// Filters whose Python result is a Markup again when given one (str methods of Markup).
Value SameKind(const Value& input, std::string text) {
  return input.is_markup() ? Value::Markup(std::move(text)) : Value(std::move(text));
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
  return SameKind(v, PyStrip(v.Str(), chars && !chars->is_none() ? chars->str() : std::string(), true, true,
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
Value FilterLower(const Value& v, const CallArgs&) { return SameKind(v, PyLower(v.Str())); }
Value FilterUpper(const Value& v, const CallArgs&) { return SameKind(v, PyUpper(v.Str())); }
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
// unique/sort compare strings case-insensitively unless case_sensitive is set.
Value SortKey(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value(PyLower(v.str())) : v;
}
Value FilterUnique(const Value& v, const CallArgs& args) {
  const bool case_sensitive = args.GetOr(0, "case_sensitive", Value(false)).Truthy();
  const Value* attribute = Arg(args, 1, "attribute");
  std::vector<Value> out, seen;
  for (const Value& item : v.Items()) {
    Value key = SortKey(attribute && !attribute->is_none() ? Attribute(item, attribute->Str()) : item, case_sensitive);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return s.Equals(key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::Generator(std::move(out));
}
Value FilterSort(const Value& v, const CallArgs& args) {
  const bool reverse = args.GetOr(0, "reverse", Value(false)).Truthy();
  const bool case_sensitive = args.GetOr(1, "case_sensitive", Value(false)).Truthy();
  const Value* attribute = Arg(args, 2, "attribute");
  // make_multi_attrgetter: "a,b.c" sorts by a, then b.c.
  std::vector<std::string> paths;
  if (attribute && !attribute->is_none()) {
    const std::string all = attribute->Str();
    for (size_t start = 0;;) {
      const size_t comma = all.find(',', start);
      paths.push_back(all.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  std::vector<std::pair<Value, Value>> keyed;  // (key, item)
  for (const Value& item : v.Items()) {
    std::vector<Value> parts;
    for (const std::string& path : paths) parts.push_back(SortKey(Attribute(item, path), case_sensitive));
    keyed.emplace_back(paths.empty() ? Value::List({SortKey(item, case_sensitive)}) : Value::List(std::move(parts)), item);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? b.first.Less(a.first) : a.first.Less(b.first);
  });
  std::vector<Value> items;
  for (auto& [key, item] : keyed) items.push_back(std::move(item));
  return Value::List(std::move(items));
}

// dictsort(case_sensitive=false, by="key", reverse=false): the (key, value) pairs, sorted.
Value FilterDictsort(const Value& v, const CallArgs& args) {
  const bool case_sensitive = args.GetOr(0, "case_sensitive", Value(false)).Truthy();
  const std::string by = args.GetOr(1, "by", Value("key")).Str();
  const bool reverse = args.GetOr(2, "reverse", Value(false)).Truthy();
  if (by != "key" && by != "value") Fail("You can only sort by either \"key\" or \"value\"");
  if (!v.is_mapping()) Fail("'" + v.TypeName() + "' object has no attribute 'items'");
  std::vector<Value> pairs;
  for (const auto& [key, value] : v.dict().items) pairs.push_back(Value::List({Value(key), value}, true));
  const size_t pos = by == "key" ? 0 : 1;
  auto key = [&](const Value& pair) { return SortKey(pair.list().items[pos], case_sensitive); };
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
    return reverse ? key(b).Less(key(a)) : key(a).Less(key(b));
  });
  return Value::List(std::move(pairs));
}

// groupby(attribute, default=none, case_sensitive=false): (grouper, list) tuples, sorted.
Value FilterGroupby(const Value& v, const CallArgs& args) {
  const Value* attribute = Arg(args, 0, "attribute");
  if (attribute == nullptr) Fail("groupby() missing required argument 'attribute'");
  const Value fallback = args.GetOr(1, "default", Value::None());
  const bool case_sensitive = args.GetOr(2, "case_sensitive", Value(false)).Truthy();
  // make_attrgetter with a default: each missing part of "a.b" becomes the default.
  std::vector<Value> parts;
  if (attribute->kind() == Value::Kind::kInt) {
    parts.push_back(*attribute);
  } else {
    const std::string path = attribute->Str();
    for (size_t start = 0;;) {
      const size_t dot = path.find('.', start);
      const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
      const std::optional<int64_t> index = digits ? ParseDecimalInt64(part) : std::nullopt;
      parts.push_back(index ? Value(*index) : Value(part));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
  }
  auto lookup = [&](const Value& item) {
    Value x = item;
    for (const Value& part : parts) {
      x = GetItem(x, part);
      if (x.is_undefined() && !fallback.is_none()) x = fallback;
    }
    return x;
  };
  std::vector<std::pair<Value, Value>> keyed;  // (sort key, item)
  for (const Value& item : v.Items()) keyed.emplace_back(SortKey(lookup(item), case_sensitive), item);
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first.Less(b.first); });
  std::vector<Value> groups;
  for (size_t i = 0; i < keyed.size();) {
    size_t j = i;
    std::vector<Value> members;
    while (j < keyed.size() && keyed[j].first.Equals(keyed[i].first)) members.push_back(keyed[j++].second);
    // The group's key has the case of its first item.
    Value grouper = case_sensitive ? keyed[i].first : lookup(members.front());
    groups.push_back(Value::GroupTuple(std::move(grouper), Value::List(std::move(members))));
    i = j;
  }
  return Value::List(std::move(groups));
}

// batch(linecount, fill_with=none): lists of linecount items.
Value FilterBatch(const Value& v, const CallArgs& args) {
  const Value* count_arg = Arg(args, 0, "linecount");
  if (count_arg == nullptr) Fail("batch() missing required argument 'linecount'");
  if (!count_arg->is_number()) Fail("batch: linecount must be a number");
  const double linecount = count_arg->float_value();
  const Value fill = args.GetOr(1, "fill_with", Value::None());
  std::vector<Value> out, current;
  for (const Value& item : v.Items()) {
    if (static_cast<double>(current.size()) == linecount) {
      out.push_back(Value::List(std::move(current)));
      current.clear();
    }
    current.push_back(item);
  }
  if (!current.empty()) {
    if (!fill.is_none() && static_cast<double>(current.size()) < linecount) {
      if (count_arg->kind() == Value::Kind::kFloat) Fail("can't multiply sequence by non-int of type 'float'");
      CheckItems(static_cast<size_t>(std::min(linecount, 1e18)));
      while (static_cast<double>(current.size()) < linecount) current.push_back(fill);
    }
    out.push_back(Value::List(std::move(current)));
  }
  return Value::Generator(std::move(out));
}

// slice(slices, fill_with=none): the items in `slices` columns.
Value FilterSlice(const Value& v, const CallArgs& args) {
  const Value* slices_arg = Arg(args, 0, "slices");
  if (slices_arg == nullptr) Fail("slice() missing required argument 'slices'");
  if (slices_arg->kind() != Value::Kind::kInt && slices_arg->kind() != Value::Kind::kBool) {
    Fail("'" + slices_arg->TypeName() + "' object cannot be interpreted as an integer");
  }
  const int64_t slices = slices_arg->int_value();
  if (slices == 0) Fail("integer division or modulo by zero");
  const Value fill = args.GetOr(1, "fill_with", Value::None());
  const std::vector<Value> seq = v.Items();
  std::vector<Value> out;
  if (slices < 0) return Value::Generator({});
  CheckItems(static_cast<size_t>(slices));
  const auto length = static_cast<int64_t>(seq.size());
  const int64_t per_slice = length / slices;
  const int64_t with_extra = length % slices;
  int64_t offset = 0;
  for (int64_t number = 0; number < slices; ++number) {
    const int64_t start = offset + number * per_slice;
    if (number < with_extra) ++offset;
    const int64_t end = offset + (number + 1) * per_slice;
    std::vector<Value> part(seq.begin() + start, seq.begin() + end);
    if (!fill.is_none() && number >= with_extra) part.push_back(fill);
    out.push_back(Value::List(std::move(part)));
  }
  return Value::Generator(std::move(out));
}

// min/max(case_sensitive=false, attribute=none): the first smallest / largest item.
Value MinOrMax(const Value& v, const CallArgs& args, bool want_max) {
  const bool case_sensitive = args.GetOr(0, "case_sensitive", Value(false)).Truthy();
  const Value* attribute = Arg(args, 1, "attribute");
  const std::vector<Value> items = v.Items();
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  auto key = [&](const Value& item) {
    return SortKey(attribute && !attribute->is_none() ? Attribute(item, attribute->Str()) : item, case_sensitive);
  };
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (want_max ? best_key.Less(k) : k.Less(best_key)) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}
Value FilterMin(const Value& v, const CallArgs& args) { return MinOrMax(v, args, false); }
Value FilterMax(const Value& v, const CallArgs& args) { return MinOrMax(v, args, true); }

// random: one item of a sequence, chosen at random.
Value FilterRandom(const Value& v, const CallArgs&) {
  if (!(v.is_string() || v.is_list()) || v.is_generator()) Fail("object of type '" + v.TypeName() + "' has no len()");
  const std::vector<Value> items = v.Items();
  if (items.empty()) return Value::Undefined("No random item, sequence was empty.");
  thread_local std::mt19937_64 engine{std::random_device{}()};
  return items[std::uniform_int_distribution<size_t>(0, items.size() - 1)(engine)];
}

Value FilterSum(const Value& v, const CallArgs& args) {
  const Value* attribute = Arg(args, 0, "attribute");
  Value total = args.GetOr(1, "start", Value(0));
  for (const Value& item : v.Items()) {
    const Value x = attribute && !attribute->is_none() ? Attribute(item, attribute->Str()) : item;
    if (x.is_number() && total.is_number()) {
      total = total.kind() == Value::Kind::kFloat || x.kind() == Value::Kind::kFloat
                  ? Value(total.float_value() + x.float_value())
                  : Value(AddInts(total.int_value(), x.int_value()));
    } else if (x.is_list() && total.is_list() && !x.is_generator() && !total.is_generator() &&
               x.list().tuple == total.list().tuple) {  // list + list
      CheckItems(total.list().items.size() + x.list().items.size());
      std::vector<Value> items = total.list().items;
      items.insert(items.end(), x.list().items.begin(), x.list().items.end());
      total = Value::List(std::move(items), x.list().tuple);
    } else {
      Fail("unsupported operand type(s) for +: '" + total.TypeName() + "' and '" + x.TypeName() + "'");
    }
  }
  return total;
}

// select/reject/selectattr/rejectattr: keep the items whose test (truthiness when
// none is named) gives `keep`.
Value SelectItems(const Value& v, const CallArgs& args, bool by_attribute, bool keep) {
  if (!v.Truthy()) return Value::Generator({});  // Jinja: `if value: for item in value`
  size_t next = 0;
  std::string attribute;
  if (by_attribute) attribute = Required(args, next++, "attribute", "selectattr").Str();
  std::string test;
  CallArgs test_args;
  if (next < args.positional.size()) {
    test = args.positional[next++].Str();
    test_args.positional.assign(args.positional.begin() + static_cast<long>(next), args.positional.end());
  }
  std::vector<Value> out;
  for (const Value& item : v.Items()) {
    const Value subject = by_attribute ? Attribute(item, attribute) : item;
    const bool passed = test.empty() ? subject.Truthy() : ApplyTest(test, subject, test_args);
    if (passed == keep) out.push_back(item);
  }
  return Value::Generator(std::move(out));
}
Value FilterSelect(const Value& v, const CallArgs& a) { return SelectItems(v, a, false, true); }
Value FilterReject(const Value& v, const CallArgs& a) { return SelectItems(v, a, false, false); }
Value FilterSelectAttr(const Value& v, const CallArgs& a) { return SelectItems(v, a, true, true); }
Value FilterRejectAttr(const Value& v, const CallArgs& a) { return SelectItems(v, a, true, false); }

Value FilterMap(const Value& v, const CallArgs& args) {
  std::vector<Value> out;
  if (!v.Truthy()) return Value::Generator({});  // Jinja: `if value: for item in value`
  if (const Value* attribute = Arg(args, 99, "attribute")) {
    const Value* fallback = Arg(args, 99, "default");
    for (const Value& item : v.Items()) {
      Value x = Attribute(item, attribute->Str());
      out.push_back(x.is_undefined() && fallback ? *fallback : x);
    }
    return Value::Generator(std::move(out));
  }
  if (args.positional.empty()) Fail("map requires a filter argument");
  const std::string filter = args.positional[0].Str();
  if (!HasFilter(filter)) Fail("no filter named '" + filter + "'");
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : v.Items()) out.push_back(ApplyFilter(filter, item, rest));
  return Value::Generator(std::move(out));
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
