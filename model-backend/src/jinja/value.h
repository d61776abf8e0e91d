// The values a Jinja template computes with, modelled on the Python objects Jinja2 uses
// (transformers renders chat templates with Python's jinja2): None, bool, int, float,
// str, list/tuple, dict (insertion-ordered, string keys), callables, namespace() objects
// and Undefined. Lists and dicts are shared by reference, as in Python; the sandbox the
// templates run in never mutates them, except namespace attributes.
//
// Errors during evaluation are thrown as JinjaError (the interpreter's only exception);
// JinjaTemplate::Render turns them into a Status naming the template line.
//
// Thread-safety: a Value is not synchronised; one render uses its values on one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/json/value.hpp>

namespace sinew::jinja {

struct JinjaError {
  std::string message;
  int line = 0;  // 0: not known yet; the interpreter fills in the statement's line
};
[[noreturn]] void Fail(std::string message);

class Value;
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The positional or keyword argument `name` at `index`, or nullptr.
  const Value* Get(size_t index, std::string_view name) const;
  // That argument, or `fallback` when it was not given.
  Value GetOr(size_t index, std::string_view name, Value fallback) const;
};
using Function = std::function<Value(CallArgs&)>;

struct ListData {
  std::vector<Value> items;
  bool tuple = false;      // prints as (a, b)
  bool group = false;      // groupby's (grouper, list) namedtuple: a tuple with those attributes
  bool generator = false;  // a Python generator (what map, select, items, ... return):
                           // always true, no len(), not JSON, not printable, not indexable
};
struct DictData {
  std::vector<std::pair<std::string, Value>> items;
  const Value* Find(std::string_view key) const;
  void Set(std::string key, Value value);
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction, kNamespace };

  Value() = default;  // Undefined
  static Value Undefined(std::string name = {});
  static Value None();
  Value(bool b);                // NOLINT(google-explicit-constructor)
  Value(int64_t i);             // NOLINT
  Value(int i) : Value(static_cast<int64_t>(i)) {}  // NOLINT
  Value(double f);              // NOLINT
  Value(std::string s);         // NOLINT
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT
  // markupsafe.Markup: what |safe returns. `+` with a plain str HTML-escapes the other
  // side (functionary's template relies on it); str() and output are unchanged.
  static Value Markup(std::string s);
  static Value List(std::vector<Value> items = {}, bool tuple = false);
  static Value Generator(std::vector<Value> items);
  static Value GroupTuple(Value grouper, Value list);
  static Value Dict(std::shared_ptr<DictData> dict = nullptr);
  static Value Namespace();
  static Value Func(std::string name, Function fn);
  static Value FromJson(const boost::json::value& json);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_markup() const { return kind_ == Kind::kString && markup_; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_generator() const { return kind_ == Kind::kList && list_->generator; }
  bool is_group() const { return kind_ == Kind::kList && list_->group; }
  bool is_mapping() const { return kind_ == Kind::kDict || kind_ == Kind::kNamespace; }

  bool bool_value() const { return bool_; }
  int64_t int_value() const { return kind_ == Kind::kBool ? (bool_ ? 1 : 0) : int_; }
  double float_value() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_value()); }
  const std::string& str() const { return string_; }  // string, or Undefined's name or hint
  ListData& list() const { return *list_; }
  DictData& dict() const { return *dict_; }
  const std::string& function_name() const { return string_; }
  Value Call(CallArgs& args) const;

  // Python truthiness.
  bool Truthy() const;
  // Python str() (Undefined prints as ""), repr() and the length of len().
  std::string Str() const;
  std::string Repr() const;
  // Iteration as Python's for does (dict: keys, str: characters; Undefined: nothing).
  std::vector<Value> Items() const;
  // json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=...) (indent < 0: none).
  std::string ToJson(int indent, bool sort_keys = false) const;
  // Python ==.
  bool Equals(const Value& other) const;
  // Python <; throws for types that do not order.
  bool Less(const Value& other) const;
  // Python type name for messages ("str", "dict", ...).
  std::string TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool bool_ = false;
  bool markup_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::string string_;
  std::shared_ptr<ListData> list_;
  std::shared_ptr<DictData> dict_;
  std::shared_ptr<Function> function_;
};

// Jinja's message for using an Undefined: "'x' is undefined" for a missing variable,
// or the hint it carries ("'dict object' has no attribute 'x'").
std::string UndefinedMessage(const Value& undefined);
// Python's repr() of a float ("1.0", "1e+16", "2.5e-07").
std::string FloatRepr(double value);
// UTF-8 <-> code points (Python str indexing, len, slicing work on code points).
std::u32string DecodeUtf8(std::string_view text);
std::string EncodeUtf8(std::u32string_view text);
// markupsafe.escape: & < > " ' as HTML entities.
std::string HtmlEscape(std::string_view text);
// Python str.isspace() for one code point.
bool IsPySpace(char32_t c);
// A run of decimal digits as an int64; nullopt past the int64 range (Python's ints have
// none, ours stop there).
std::optional<int64_t> ParseDecimalInt64(std::string_view digits);
// A float literal as Python reads it: past the double range it is inf (1e999), below it
// 0.0, never an error.
double ParseFloatLiteral(const std::string& text);

}  // namespace sinew::jinja
