// The parsed form of a Jinja template: expression and statement nodes, each of which
// evaluates itself against a Context (interpreter.cc). Built by Parse (parser.cc).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "value.h"

namespace sinew::jinja {

// Variables of one scope; lookups fall through to the parent (a for-loop iteration and
// a macro call each get their own, as in Jinja2).
struct Frame {
  std::unordered_map<std::string, Value> vars;
  Frame* parent = nullptr;
};

struct Context {
  Frame* frame = nullptr;
  Frame* root = nullptr;  // template-level variables, render arguments, globals
  enum class Control { kNone, kBreak, kContinue } control = Control::kNone;
  int depth = 0;  // macro call depth, bounded
  uint64_t steps = 0;  // statements and loop iterations run so far

  Value Lookup(const std::string& name) const;
  void Set(const std::string& name, Value value) { frame->vars[name] = std::move(value); }
};

struct Expr {
  explicit Expr(int at_line) : line(at_line) {}
  virtual ~Expr() = default;
  virtual Value Eval(Context& ctx) const = 0;
  int line;
};
using ExprPtr = std::unique_ptr<Expr>;

struct Stmt {
  explicit Stmt(int at_line) : line(at_line) {}
  virtual ~Stmt() = default;
  virtual void Exec(Context& ctx, std::string& out) const = 0;
  int line;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;
// Runs statements in order, stopping at a break or continue.
void ExecBody(const Body& body, Context& ctx, std::string& out);
// Counts one step of the render; fails past Bounds().max_steps.
void CountStep(Context& ctx);

struct CallArgExprs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  CallArgs Eval(Context& ctx) const;
};

struct LiteralExpr : Expr {
  LiteralExpr(int at_line, Value v) : Expr(at_line), value(std::move(v)) {}
  Value Eval(Context& ctx) const override;
  Value value;
};
struct NameExpr : Expr {
  NameExpr(int at_line, std::string n) : Expr(at_line), name(std::move(n)) {}
  Value Eval(Context& ctx) const override;
  std::string name;
};
struct ListExpr : Expr {
  using Expr::Expr;
  Value Eval(Context& ctx) const override;
  std::vector<ExprPtr> items;
  bool tuple = false;
};
struct DictExpr : Expr {
  using Expr::Expr;
  Value Eval(Context& ctx) const override;
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};
struct AttrExpr : Expr {
  using Expr::Expr;
  Value Eval(Context& ctx) const override;
  ExprPtr object;
  std::string name;
};
struct ItemExpr : Expr {
  using Expr::Expr;
  Value Eval(Context& ctx) const override;
  ExprPtr object, index;
};
struct SliceExpr : Expr {
  using Expr::Expr;
  Value Eval(Context& ctx) const override;
  ExprPtr object, start, stop, step;  // each may be null
};
struct CallExpr : Expr {
  using Expr::Expr;
  Value Eval(Context& ctx) const override;
  ExprPtr callee;
  CallArgExprs args;
};
struct FilterExpr : Expr {
  using Expr::Expr;
  Value Eval(Context& ctx) const override;
  Value Apply(Context& ctx, const Value& input) const;
  ExprPtr input;  // null inside a {% filter %} block chain
  std::string name;
  CallArgExprs args;
};
struct TestExpr : Expr {
  using Expr::Expr;
  Value Eval(Context& ctx) const override;
  ExprPtr input;
  std::string name;
  CallArgExprs args;
  bool negated = false;
};
struct UnaryExpr : Expr {
  using Expr::Expr;
  Value Eval(Context& ctx) const override;
  std::string op;  // "not", "-", "+"
  ExprPtr operand;
};
struct BinaryExpr : Expr {
  using Expr::Expr;
  Value Eval(Context& ctx) const override;
  std::string op;  // "or", "and", "+", "-", "*", "/", "//", "%", "**", "~"
  ExprPtr left, right;
};
struct CompareExpr : Expr {
  using Expr::Expr;
  Value Eval(Context& ctx) const override;
  ExprPtr first;
  std::vector<std::pair<std::string, ExprPtr>> rest;  // "==", "!=", "<", ..., "in", "notin"
};
struct CondExpr : Expr {
  using Expr::Expr;
  Value Eval(Context& ctx) const override;
  ExprPtr condition, then, otherwise;  // otherwise may be null (Undefined)
};

struct TextStmt : Stmt {
  TextStmt(int at_line, std::string t) : Stmt(at_line), text(std::move(t)) {}
  void Exec(Context& ctx, std::string& out) const override;
  std::string text;
};
struct OutputStmt : Stmt {
  using Stmt::Stmt;
  void Exec(Context& ctx, std::string& out) const override;
  ExprPtr expr;
};
struct IfStmt : Stmt {
  using Stmt::Stmt;
  void Exec(Context& ctx, std::string& out) const override;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body otherwise;
};
struct ForStmt : Stmt {
  using Stmt::Stmt;
  void Exec(Context& ctx, std::string& out) const override;
  std::vector<std::string> targets;
  ExprPtr iterable, filter;  // filter may be null
  Body body, otherwise;
};
struct SetStmt : Stmt {
  using Stmt::Stmt;
  void Exec(Context& ctx, std::string& out) const override;
  std::vector<std::string> targets;  // one name, several to unpack, or {namespace, attr}
  bool attribute = false;            // {% set ns.attr = ... %}
  ExprPtr value;                     // null: a block set capturing `body`
  Body body;
  std::vector<std::unique_ptr<FilterExpr>> filters;  // block set: applied to the capture
};
struct MacroStmt : Stmt {
  using Stmt::Stmt;
  void Exec(Context& ctx, std::string& out) const override;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default may be null
  std::shared_ptr<Body> body;
};
struct FilterBlockStmt : Stmt {
  using Stmt::Stmt;
  void Exec(Context& ctx, std::string& out) const override;
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
};
struct ControlStmt : Stmt {
  ControlStmt(int at_line, Context::Control c) : Stmt(at_line), control(c) {}
  void Exec(Context& ctx, std::string& out) const override;
  Context::Control control;
};
struct BlockStmt : Stmt {  // {% generation %} (transformers' extension): renders its body
  using Stmt::Stmt;
  void Exec(Context& ctx, std::string& out) const override;
  Body body;
};

// Parses the template; throws JinjaError naming the line for a syntax error or a filter
// or test that does not exist.
Body Parse(std::string_view source);

}  // namespace sinew::jinja
