// Evaluation of the template tree, with Python's operator semantics and Jinja2's
// scoping: a for-loop iteration and a macro call each get a fresh scope (assignments in
// them do not leak out; namespace() objects carry state across), if-blocks do not.
#include <cmath>

#include "ast.h"
#include "bounds.h"
#include "builtins.h"
#include "methods.h"

namespace sinew::jinja {
namespace {

constexpr int kMaxMacroDepth = 64;

// Fills in the line of an error raised below `line` that has none yet.
template <typename Fn>
auto WithLine(int line, Fn fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (JinjaError& error) {
    if (error.line == 0) error.line = line;
    throw;
  }
}

[[noreturn]] void Unsupported(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) Fail(UndefinedMessage(a));
  if (b.is_undefined()) Fail(UndefinedMessage(b));
  Fail("unsupported operand type(s) for " + op + ": '" + a.TypeName() + "' and '" + b.TypeName() + "'");
}

bool IsFloat(const Value& a, const Value& b) {
  return a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat;
}

int64_t FloorDiv(int64_t a, int64_t b) {
  if (b == -1) return NegInt(a);  // INT64_MIN / -1 overflows
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Python's a % b for ints: the sign of b. Computed from C++'s remainder, which cannot
// overflow where a - (a // b) * b can (INT64_MAX % -2).
int64_t FloorMod(int64_t a, int64_t b) {
  if (b == -1) return 0;  // INT64_MIN % -1 is undefined in C++
  int64_t r = a % b;
  if (r != 0 && (r < 0) != (b < 0)) r += b;
  return r;
}

Value Repeat(const Value& seq, int64_t times) {
  const size_t each = seq.is_string() ? seq.str().size() : seq.list().items.size();
  if (times > 0 && each > 0) {
    const size_t bound = seq.is_string() ? Bounds().max_text_bytes : Bounds().max_items;
    if (static_cast<uint64_t>(times) > bound / each) {
      Fail("repeating " + std::to_string(each) + (seq.is_string() ? " bytes " : " items ") +
           std::to_string(times) + " times is past the renderer's bound of " + std::to_string(bound));
    }
  }
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.str();
    return Value(out);
  }
  std::vector<Value> out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.list().items.begin(), seq.list().items.end());
  return Value::List(std::move(out), seq.list().tuple);
}

Value Arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string left = a.Str();
    const std::string right = b.Str();
    CheckTextSize(left.size() + right.size());
    return Value(std::move(left += right));
  }
  const bool numbers = a.is_number() && b.is_number();
  if (op == "+") {
    if (numbers) return IsFloat(a, b) ? Value(a.float_value() + b.float_value()) : Value(AddInts(a.int_value(), b.int_value()));
    if (a.is_string() && b.is_string()) CheckTextSize(a.str().size() + b.str().size());
    if (a.is_markup() || b.is_markup()) {  // Markup.__add__ / __radd__ escape the plain side
      if (!a.is_string() || !b.is_string()) Unsupported(op, a, b);
      return Value::Markup((a.is_markup() ? a.str() : HtmlEscape(a.str())) +
                           (b.is_markup() ? b.str() : HtmlEscape(b.str())));
    }
    if (a.is_string() && b.is_string()) return Value(a.str() + b.str());
    if (a.is_list() && b.is_list() && a.list().tuple == b.list().tuple) {
      CheckItems(a.list().items.size() + b.list().items.size());
      std::vector<Value> items = a.list().items;
      items.insert(items.end(), b.list().items.begin(), b.list().items.end());
      return Value::List(std::move(items), a.list().tuple);
    }
  } else if (op == "-") {
    if (numbers) return IsFloat(a, b) ? Value(a.float_value() - b.float_value()) : Value(SubInts(a.int_value(), b.int_value()));
  } else if (op == "*") {
    if (numbers) return IsFloat(a, b) ? Value(a.float_value() * b.float_value()) : Value(MulInts(a.int_value(), b.int_value()));
    if ((a.is_string() || a.is_list()) && b.kind() == Value::Kind::kInt) return Repeat(a, b.int_value());
    if ((b.is_string() || b.is_list()) && a.kind() == Value::Kind::kInt) return Repeat(b, a.int_value());
  } else if (op == "/") {
    if (numbers) {
      if (b.float_value() == 0) Fail("division by zero");
      return Value(a.float_value() / b.float_value());
    }
  } else if (op == "//" || op == "%") {
    if (numbers) {
      if (b.float_value() == 0) Fail(op == "//" ? "integer division or modulo by zero" : "modulo by zero");
      if (IsFloat(a, b)) {
        const double q = std::floor(a.float_value() / b.float_value());
        return op == "//" ? Value(q) : Value(a.float_value() - q * b.float_value());
      }
      if (op == "//") return Value(FloorDiv(a.int_value(), b.int_value()));
      return Value(FloorMod(a.int_value(), b.int_value()));
    }
    if (op == "%" && a.is_string()) Fail("printf-style '%' string formatting is not supported");
  } else if (op == "**") {
    if (numbers) {
      if (!IsFloat(a, b) && b.int_value() >= 0) return Value(PowInts(a.int_value(), b.int_value()));
      return Value(std::pow(a.float_value(), b.float_value()));
    }
  }
  Unsupported(op, a, b);
}

Value LoopInfo(const std::vector<Value>& items, size_t index) {
  auto loop = std::make_shared<DictData>();
  const auto n = static_cast<int64_t>(items.size());
  const auto i = static_cast<int64_t>(index);
  loop->Set("index0", Value(i));
  loop->Set("index", Value(i + 1));
  loop->Set("revindex0", Value(n - i - 1));
  loop->Set("revindex", Value(n - i));
  loop->Set("first", Value(index == 0));
  loop->Set("last", Value(i == n - 1));
  loop->Set("length", Value(n));
  loop->Set("depth", Value(1));
  loop->Set("depth0", Value(0));
  if (index > 0) loop->Set("previtem", items[index - 1]);
  if (i + 1 < n) loop->Set("nextitem", items[index + 1]);
  loop->Set("cycle", Value::Func("cycle", [i](CallArgs& args) -> Value {
              if (args.positional.empty()) Fail("no items for cycling given");
              return args.positional[static_cast<size_t>(i) % args.positional.size()];
            }));
  return Value::Dict(std::move(loop));
}

void Assign(Context& ctx, const std::vector<std::string>& targets, const Value& value) {
  if (targets.size() == 1) {
    ctx.Set(targets[0], value);
    return;
  }
  std::vector<Value> items = value.Items();
  if (items.size() != targets.size()) {
    Fail("cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(targets.size()));
  }
  for (size_t i = 0; i < targets.size(); ++i) ctx.Set(targets[i], items[i]);
}

}  // namespace

Value Context::Lookup(const std::string& name) const {
  for (const Frame* f = frame; f != nullptr; f = f->parent) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  return Value::Undefined(name);
}

void CountStep(Context& ctx) {
  if (++ctx.steps > Bounds().max_steps) {
    Fail("the template ran past the renderer's bound of " + std::to_string(Bounds().max_steps) + " steps");
  }
}

void ExecBody(const Body& body, Context& ctx, std::string& out) {
  for (const StmtPtr& stmt : body) {
    WithLine(stmt->line, [&] {
      CountStep(ctx);
      stmt->Exec(ctx, out);
      CheckTextSize(out.size());
    });
    if (ctx.control != Context::Control::kNone) return;
  }
}

CallArgs CallArgExprs::Eval(Context& ctx) const {
  CallArgs args;
  for (const ExprPtr& e : positional) args.positional.push_back(e->Eval(ctx));
  for (const auto& [name, e] : keyword) args.keyword.emplace_back(name, e->Eval(ctx));
  return args;
}

Value LiteralExpr::Eval(Context&) const { return value; }
Value NameExpr::Eval(Context& ctx) const { return ctx.Lookup(name); }

Value ListExpr::Eval(Context& ctx) const {
  std::vector<Value> values;
  for (const ExprPtr& item : items) values.push_back(item->Eval(ctx));
  return Value::List(std::move(values), tuple);
}

Value DictExpr::Eval(Context& ctx) const {
  Value dict = Value::Dict();
  for (const auto& [key, value] : items) {
    const Value k = key->Eval(ctx);
    if (!k.is_string()) WithLine(line, [] { Fail("dict keys must be strings here"); });
    dict.dict().Set(k.str(), value->Eval(ctx));
  }
  return dict;
}

Value AttrExpr::Eval(Context& ctx) const {
  const Value obj = object->Eval(ctx);
  return WithLine(line, [&] { return GetAttr(obj, name); });
}

Value ItemExpr::Eval(Context& ctx) const {
  const Value obj = object->Eval(ctx);
  const Value key = index->Eval(ctx);
  return WithLine(line, [&] { return GetItem(obj, key); });
}

Value SliceExpr::Eval(Context& ctx) const {
  const Value obj = object->Eval(ctx);
  const Value a = start ? start->Eval(ctx) : Value::None();
  const Value b = stop ? stop->Eval(ctx) : Value::None();
  const Value c = step ? step->Eval(ctx) : Value::None();
  return WithLine(line, [&] { return GetSlice(obj, &a, &b, &c); });
}

Value CallExpr::Eval(Context& ctx) const {
  const Value fn = callee->Eval(ctx);
  CallArgs call_args = args.Eval(ctx);
  return WithLine(line, [&] { return fn.Call(call_args); });
}

Value FilterExpr::Apply(Context& ctx, const Value& value) const {
  const CallArgs call_args = args.Eval(ctx);
  return WithLine(line, [&] { return ApplyFilter(name, value, call_args); });
}

Value FilterExpr::Eval(Context& ctx) const { return Apply(ctx, input->Eval(ctx)); }

Value TestExpr::Eval(Context& ctx) const {
  const Value value = input->Eval(ctx);
  const CallArgs call_args = args.Eval(ctx);
  return WithLine(line, [&] { return Value(ApplyTest(name, value, call_args) != negated); });
}

Value UnaryExpr::Eval(Context& ctx) const {
  const Value v = operand->Eval(ctx);
  if (op == "not") return Value(!v.Truthy());
  return WithLine(line, [&]() -> Value {
    if (!v.is_number()) Fail("bad operand type for unary " + op + ": '" + v.TypeName() + "'");
    if (op == "+") return v.kind() == Value::Kind::kFloat ? v : Value(v.int_value());
    return v.kind() == Value::Kind::kFloat ? Value(-v.float_value()) : Value(NegInt(v.int_value()));
  });
}

Value BinaryExpr::Eval(Context& ctx) const {
  Value a = left->Eval(ctx);
  if (op == "or") return a.Truthy() ? a : right->Eval(ctx);
  if (op == "and") return a.Truthy() ? right->Eval(ctx) : a;
  const Value b = right->Eval(ctx);
  return WithLine(line, [&] { return Arithmetic(op, a, b); });
}

Value CompareExpr::Eval(Context& ctx) const {
  Value a = first->Eval(ctx);
  for (const auto& step : rest) {
    const auto& op = step.first;  // (not a structured binding: clang 14 cannot capture those)
    Value b = step.second->Eval(ctx);
    const bool ok = WithLine(line, [&] {
      if (op == "==") return a.Equals(b);
      if (op == "!=") return !a.Equals(b);
      if (op == "<") return a.Less(b);
      if (op == ">") return b.Less(a);
      if (op == "<=") return a.Less(b) || a.Equals(b);
      if (op == ">=") return b.Less(a) || a.Equals(b);
      if (op == "in") return Contains(b, a);
      return !Contains(b, a);
    });
    if (!ok) return Value(false);
    a = std::move(b);
  }
  return Value(true);
}

Value CondExpr::Eval(Context& ctx) const {
  if (condition->Eval(ctx).Truthy()) return then->Eval(ctx);
  return otherwise ? otherwise->Eval(ctx) : Value::Undefined();
}

void TextStmt::Exec(Context&, std::string& out) const { out += text; }
void OutputStmt::Exec(Context& ctx, std::string& out) const { out += expr->Eval(ctx).Str(); }

void IfStmt::Exec(Context& ctx, std::string& out) const {
  for (const auto& [condition, body] : branches) {
    if (condition->Eval(ctx).Truthy()) {
      ExecBody(body, ctx, out);
      return;
    }
  }
  ExecBody(otherwise, ctx, out);
}

void ForStmt::Exec(Context& ctx, std::string& out) const {
  std::vector<Value> items = iterable->Eval(ctx).Items();
  if (filter) {
    std::vector<Value> kept;
    for (const Value& item : items) {
      CountStep(ctx);
      Frame frame{{}, ctx.frame};
      Frame* saved = std::exchange(ctx.frame, &frame);
      Assign(ctx, targets, item);
      const bool keep = filter->Eval(ctx).Truthy();
      ctx.frame = saved;
      if (keep) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    ExecBody(otherwise, ctx, out);
    return;
  }
  for (size_t index = 0; index < items.size(); ++index) {
    CountStep(ctx);
    Frame frame{{}, ctx.frame};
    Frame* saved = std::exchange(ctx.frame, &frame);
    try {
      Assign(ctx, targets, items[index]);
      ctx.Set("loop", LoopInfo(items, index));
      ExecBody(body, ctx, out);
    } catch (...) {
      ctx.frame = saved;
      throw;
    }
    ctx.frame = saved;
    const Context::Control control = std::exchange(ctx.control, Context::Control::kNone);
    if (control == Context::Control::kBreak) break;
  }
}

void SetStmt::Exec(Context& ctx, std::string&) const {
  Value v;
  if (value) {
    v = value->Eval(ctx);
  } else {
    std::string captured;
    ExecBody(body, ctx, captured);
    v = Value(std::move(captured));
    for (const auto& f : filters) v = f->Apply(ctx, v);
  }
  if (attribute) {
    const Value ns = ctx.Lookup(targets[0]);
    if (ns.kind() != Value::Kind::kNamespace) Fail("cannot assign attribute on non-namespace object");
    ns.dict().Set(targets[1], std::move(v));
    return;
  }
  Assign(ctx, targets, v);
}

void MacroStmt::Exec(Context& ctx, std::string&) const {
  Context* context = &ctx;
  const MacroStmt* macro = this;
  ctx.Set(name, Value::Func(name, [context, macro](CallArgs& args) -> Value {
            Context& c = *context;
            if (args.positional.size() > macro->params.size()) {
              Fail("macro '" + macro->name + "' takes not more than " + std::to_string(macro->params.size()) +
                   " argument(s)");
            }
            if (c.depth >= kMaxMacroDepth) Fail("macro calls nested too deeply");
            Frame frame{{}, c.root};
            Frame* saved = std::exchange(c.frame, &frame);
            ++c.depth;
            std::string out;
            try {
              for (size_t i = 0; i < macro->params.size(); ++i) {
                const auto& [param, fallback] = macro->params[i];
                const Value* given = args.Get(i, param);
                c.Set(param, given ? *given : fallback ? fallback->Eval(c) : Value::Undefined(param));
              }
              for (const auto& [key, value] : args.keyword) {
                bool known = false;
                for (const auto& param : macro->params) known = known || param.first == key;
                if (!known) Fail("macro '" + macro->name + "' takes no keyword argument '" + key + "'");
              }
              ExecBody(*macro->body, c, out);
            } catch (...) {
              c.frame = saved;
              --c.depth;
              throw;
            }
            c.frame = saved;
            --c.depth;
            c.control = Context::Control::kNone;
            return Value(std::move(out));
          }));
}

void FilterBlockStmt::Exec(Context& ctx, std::string& out) const {
  std::string captured;
  ExecBody(body, ctx, captured);
  Value v(std::move(captured));
  for (const auto& f : filters) v = f->Apply(ctx, v);
  out += v.Str();
}

void ControlStmt::Exec(Context& ctx, std::string&) const { ctx.control = control; }
void BlockStmt::Exec(Context& ctx, std::string& out) const { ExecBody(body, ctx, out); }

}  // namespace sinew::jinja
