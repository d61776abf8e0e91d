#include "sequence_filters.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "bounds.h"
#include "builtins.h"
#include "filter_util.h"
#include "methods.h"

namespace sinew::jinja {

namespace {
// unique/sort compare strings case-insensitively unless case_sensitive is set.
Value SortKey(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value(PyLower(v.str())) : v;
}
}  // namespace
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

namespace {
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
}  // namespace
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

namespace {
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
}  // namespace
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

}  // namespace sinew::jinja
