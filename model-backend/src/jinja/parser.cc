// Recursive-descent parser following Jinja2's grammar and operator precedence
// (jinja2/parser.py): condexpr < or < and < not < compare < +,- < ~ < *,/,//,% < ** <
// unary -,+ < primary with postfix .attr [item] (call), then | filters and `is` tests.
#include <set>

#include "ast.h"
#include "builtins.h"
#include "lexer.h"

namespace sinew::jinja {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body ParseTemplate() {
    Body body = ParseBody({});
    if (Cur().kind != Token::Kind::kEof) {
      Error("unexpected '" + Cur().text + "'");
    }
    return body;
  }

 private:
  using Kind = Token::Kind;

  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Peek(size_t ahead = 1) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  [[noreturn]] void Error(std::string message) const { throw JinjaError{std::move(message), Cur().line}; }
  bool IsOp(std::string_view op) const { return Cur().kind == Kind::kOp && Cur().text == op; }
  bool IsName(std::string_view name) const { return Cur().kind == Kind::kName && Cur().text == name; }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op)) return false;
    ++pos_;
    return true;
  }
  bool SkipName(std::string_view name) {
    if (!IsName(name)) return false;
    ++pos_;
    return true;
  }
  void ExpectOp(std::string_view op) {
    if (!SkipOp(op)) Error("expected '" + std::string(op) + "', got " + Describe());
  }
  std::string ExpectName() {
    if (Cur().kind != Kind::kName) Error("expected a name, got " + Describe());
    return tokens_[pos_++].text;
  }
  void ExpectBlockEnd() {
    if (Cur().kind != Kind::kBlockEnd) Error("expected end of statement block, got " + Describe());
    ++pos_;
  }
  std::string Describe() const {
    switch (Cur().kind) {
      case Kind::kEof:
        return "end of template";
      case Kind::kBlockEnd:
        return "end of statement block";
      case Kind::kVarEnd:
        return "end of print statement";
      default:
        return "'" + Cur().text + "'";
    }
  }

  // Statements until a {% name %} with name in `ends` (left unconsumed, positioned at
  // the name) or the end of the template.
  Body ParseBody(const std::set<std::string>& ends) {
    Body body;
    while (true) {
      const Token& t = Cur();
      if (t.kind == Kind::kEof) {
        if (!ends.empty()) {
          std::string names;
          for (const std::string& end : ends) names += (names.empty() ? "'" : " or '") + end + "'";
          Error("unexpected end of template, expected " + names);
        }
        return body;
      }
      if (t.kind == Kind::kText) {
        body.push_back(std::make_unique<TextStmt>(t.line, t.text));
        ++pos_;
      } else if (t.kind == Kind::kVarBegin) {
        ++pos_;
        auto out = std::make_unique<OutputStmt>(t.line);
        out->expr = ParseExpression();
        if (Cur().kind != Kind::kVarEnd) Error("expected end of print statement, got " + Describe());
        ++pos_;
        body.push_back(std::move(out));
      } else if (t.kind == Kind::kBlockBegin) {
        ++pos_;
        if (Cur().kind != Kind::kName) Error("expected a statement name, got " + Describe());
        if (ends.count(Cur().text)) return body;
        body.push_back(ParseStatement());
      } else {
        Error("unexpected " + Describe());
      }
    }
  }

  // Consumes "{% endname %}" after ParseBody stopped at it.
  void EndBlock(std::string_view name) {
    if (!SkipName(name)) Error("expected '" + std::string(name) + "'");
    ExpectBlockEnd();
  }

  StmtPtr ParseStatement() {
    const int line = Cur().line;
    const std::string keyword = ExpectName();
    if (keyword == "if") {
      auto stmt = std::make_unique<IfStmt>(line);
      ExprPtr cond = ParseExpression();
      ExpectBlockEnd();
      while (true) {
        Body body = ParseBody({"elif", "else", "endif"});
        stmt->branches.emplace_back(std::move(cond), std::move(body));
        if (SkipName("elif")) {
          cond = ParseExpression();
          ExpectBlockEnd();
          continue;
        }
        if (SkipName("else")) {
          ExpectBlockEnd();
          stmt->otherwise = ParseBody({"endif"});
        }
        EndBlock("endif");
        return stmt;
      }
    }
    if (keyword == "for") {
      auto stmt = std::make_unique<ForStmt>(line);
      do {
        stmt->targets.push_back(ExpectName());
      } while (SkipOp(","));
      if (!SkipName("in")) Error("expected 'in', got " + Describe());
      stmt->iterable = ParseOr();
      if (SkipName("if")) stmt->filter = ParseExpression(false);
      if (IsName("recursive")) Error("recursive loops are not supported");
      ExpectBlockEnd();
      stmt->body = ParseBody({"else", "endfor"});
      if (SkipName("else")) {
        ExpectBlockEnd();
        stmt->otherwise = ParseBody({"endfor"});
      }
      EndBlock("endfor");
      return stmt;
    }
    if (keyword == "set") {
      auto stmt = std::make_unique<SetStmt>(line);
      stmt->targets.push_back(ExpectName());
      if (SkipOp(".")) {
        stmt->attribute = true;
        stmt->targets.push_back(ExpectName());
      } else {
        while (SkipOp(",")) stmt->targets.push_back(ExpectName());
      }
      if (SkipOp("=")) {
        stmt->value = ParseTupleOrExpression();
        ExpectBlockEnd();
        return stmt;
      }
      while (SkipOp("|")) stmt->filters.push_back(ParseFilter(nullptr));
      ExpectBlockEnd();
      stmt->body = ParseBody({"endset"});
      EndBlock("endset");
      return stmt;
    }
    if (keyword == "macro") {
      auto stmt = std::make_unique<MacroStmt>(line);
      stmt->name = ExpectName();
      ExpectOp("(");
      while (!SkipOp(")")) {
        if (!stmt->params.empty()) ExpectOp(",");
        std::string param = ExpectName();
        ExprPtr def = SkipOp("=") ? ParseExpression() : nullptr;
        stmt->params.emplace_back(std::move(param), std::move(def));
      }
      ExpectBlockEnd();
      stmt->body = std::make_shared<Body>(ParseBody({"endmacro"}));
      EndBlock("endmacro");
      return stmt;
    }
    if (keyword == "filter") {
      auto stmt = std::make_unique<FilterBlockStmt>(line);
      do {
        stmt->filters.push_back(ParseFilter(nullptr));
      } while (SkipOp("|"));
      ExpectBlockEnd();
      stmt->body = ParseBody({"endfilter"});
      EndBlock("endfilter");
      return stmt;
    }
    if (keyword == "generation") {
      auto stmt = std::make_unique<BlockStmt>(line);
      ExpectBlockEnd();
      stmt->body = ParseBody({"endgeneration"});
      EndBlock("endgeneration");
      return stmt;
    }
    if (keyword == "break" || keyword == "continue") {
      ExpectBlockEnd();
      return std::make_unique<ControlStmt>(
          line, keyword == "break" ? Context::Control::kBreak : Context::Control::kContinue);
    }
    --pos_;
    Error("unknown or unsupported statement '" + keyword + "'");
  }

  // `a, b` builds a tuple where Jinja allows one (set values).
  ExprPtr ParseTupleOrExpression() {
    const int line = Cur().line;
    ExprPtr first = ParseExpression();
    if (!IsOp(",")) return first;
    auto tuple = std::make_unique<ListExpr>(line);
    tuple->tuple = true;
    tuple->items.push_back(std::move(first));
    while (SkipOp(",")) {
      if (Cur().kind == Kind::kBlockEnd || Cur().kind == Kind::kVarEnd) break;
      tuple->items.push_back(ParseExpression());
    }
    return tuple;
  }

  ExprPtr ParseExpression(bool with_condexpr = true) {
    if (!with_condexpr) return ParseOr();
    int line = Cur().line;
    ExprPtr expr = ParseOr();
    while (SkipName("if")) {
      auto cond = std::make_unique<CondExpr>(line);
      cond->then = std::move(expr);
      cond->condition = ParseOr();
      if (SkipName("else")) cond->otherwise = ParseExpression();
      expr = std::move(cond);
      line = Cur().line;
    }
    return expr;
  }

  ExprPtr Binary(std::string op, ExprPtr left, ExprPtr right, int line) {
    auto node = std::make_unique<BinaryExpr>(line);
    node->op = std::move(op);
    node->left = std::move(left);
    node->right = std::move(right);
    return node;
  }

  ExprPtr ParseOr() {
    ExprPtr left = ParseAnd();
    while (IsName("or")) {
      const int line = Cur().line;
      ++pos_;
      left = Binary("or", std::move(left), ParseAnd(), line);
    }
    return left;
  }
  ExprPtr ParseAnd() {
    ExprPtr left = ParseNot();
    while (IsName("and")) {
      const int line = Cur().line;
      ++pos_;
      left = Binary("and", std::move(left), ParseNot(), line);
    }
    return left;
  }
  ExprPtr ParseNot() {
    if (IsName("not")) {
      auto node = std::make_unique<UnaryExpr>(Cur().line);
      ++pos_;
      node->op = "not";
      node->operand = ParseNot();
      return node;
    }
    return ParseCompare();
  }
  ExprPtr ParseCompare() {
    const int line = Cur().line;
    ExprPtr first = ParseMath1();
    std::unique_ptr<CompareExpr> cmp;
    while (true) {
      std::string op;
      if (Cur().kind == Kind::kOp &&
          (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == ">" ||
           Cur().text == "<=" || Cur().text == ">=")) {
        op = Cur().text;
        ++pos_;
      } else if (IsName("in")) {
        op = "in";
        ++pos_;
      } else if (IsName("not") && Peek().kind == Kind::kName && Peek().text == "in") {
        op = "notin";
        pos_ += 2;
      } else {
        break;
      }
      if (!cmp) {
        cmp = std::make_unique<CompareExpr>(line);
        cmp->first = std::move(first);
      }
      cmp->rest.emplace_back(op, ParseMath1());
    }
    if (cmp) return cmp;
    return first;
  }
  ExprPtr ParseMath1() {
    ExprPtr left = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      const Token op = Cur();
      ++pos_;
      left = Binary(op.text, std::move(left), ParseConcat(), op.line);
    }
    return left;
  }
  ExprPtr ParseConcat() {
    ExprPtr left = ParseMath2();
    while (IsOp("~")) {
      const int line = Cur().line;
      ++pos_;
      left = Binary("~", std::move(left), ParseMath2(), line);
    }
    return left;
  }
  ExprPtr ParseMath2() {
    ExprPtr left = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token op = Cur();
      ++pos_;
      left = Binary(op.text, std::move(left), ParsePow(), op.line);
    }
    return left;
  }
  ExprPtr ParsePow() {
    ExprPtr left = ParseUnary(true);
    while (IsOp("**")) {
      const int line = Cur().line;
      ++pos_;
      left = Binary("**", std::move(left), ParseUnary(true), line);
    }
    return left;
  }
  ExprPtr ParseUnary(bool with_filter) {
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      auto unary = std::make_unique<UnaryExpr>(Cur().line);
      unary->op = Cur().text;
      ++pos_;
      unary->operand = ParseUnary(false);
      node = std::move(unary);
    } else {
      node = ParsePrimary();
    }
    node = ParsePostfix(std::move(node));
    if (with_filter) node = ParseFilterExpr(std::move(node));
    return node;
  }

  ExprPtr ParsePrimary() {
    const Token t = Cur();
    switch (t.kind) {
      case Kind::kName: {
        ++pos_;
        if (t.text == "true" || t.text == "True") return std::make_unique<LiteralExpr>(t.line, Value(true));
        if (t.text == "false" || t.text == "False") return std::make_unique<LiteralExpr>(t.line, Value(false));
        if (t.text == "none" || t.text == "None") return std::make_unique<LiteralExpr>(t.line, Value::None());
        return std::make_unique<NameExpr>(t.line, t.text);
      }
      case Kind::kString: {
        std::string text;
        while (Cur().kind == Kind::kString) text += tokens_[pos_++].text;  // "a" "b" joins
        return std::make_unique<LiteralExpr>(t.line, Value(std::move(text)));
      }
      case Kind::kInt:
        ++pos_;
        return std::make_unique<LiteralExpr>(t.line, Value(IntLiteral(t.text)));
      case Kind::kFloat:
        ++pos_;
        return std::make_unique<LiteralExpr>(t.line, Value(ParseFloatLiteral(t.text)));
      case Kind::kOp:
        if (t.text == "(") {
          ++pos_;
          auto tuple = std::make_unique<ListExpr>(t.line);
          tuple->tuple = true;
          if (SkipOp(")")) return tuple;
          ExprPtr first = ParseExpression();
          if (SkipOp(")")) return first;
          tuple->items.push_back(std::move(first));
          while (SkipOp(",")) {
            if (IsOp(")")) break;
            tuple->items.push_back(ParseExpression());
          }
          ExpectOp(")");
          return tuple;
        }
        if (t.text == "[") {
          ++pos_;
          auto list = std::make_unique<ListExpr>(t.line);
          while (!SkipOp("]")) {
            if (!list->items.empty()) ExpectOp(",");
            if (SkipOp("]")) break;
            list->items.push_back(ParseExpression());
          }
          return list;
        }
        if (t.text == "{") {
          ++pos_;
          auto dict = std::make_unique<DictExpr>(t.line);
          while (!SkipOp("}")) {
            if (!dict->items.empty()) ExpectOp(",");
            if (SkipOp("}")) break;
            ExprPtr key = ParseExpression();
            ExpectOp(":");
            dict->items.emplace_back(std::move(key), ParseExpression());
          }
          return dict;
        }
        break;
      default:
        break;
    }
    Error("unexpected " + Describe());
  }

  int64_t IntLiteral(const std::string& text) {
    const std::optional<int64_t> v = ParseDecimalInt64(text);
    if (!v) Error("integer literal out of range");
    return *v;
  }

  ExprPtr ParsePostfix(ExprPtr node) {
    while (true) {
      const int line = Cur().line;
      if (SkipOp(".")) {
        auto attr = std::make_unique<AttrExpr>(line);
        attr->object = std::move(node);
        if (Cur().kind == Kind::kInt) {  // foo.0 is foo[0]
          auto item = std::make_unique<ItemExpr>(line);
          item->object = std::move(attr->object);
          item->index = std::make_unique<LiteralExpr>(line, Value(IntLiteral(tokens_[pos_++].text)));
          node = std::move(item);
          continue;
        }
        attr->name = ExpectName();
        node = std::move(attr);
      } else if (SkipOp("[")) {
        node = ParseSubscript(std::move(node), line);
      } else if (IsOp("(")) {
        node = ParseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr ParseSubscript(ExprPtr object, int line) {
    ExprPtr parts[3];
    int index = 0;
    bool is_slice = false;
    while (!IsOp("]")) {
      if (SkipOp(":")) {
        is_slice = true;
        if (++index > 2) Error("too many ':' in subscript");
        continue;
      }
      if (parts[index]) Error("expected ']' or ':', got " + Describe());
      parts[index] = ParseExpression();
    }
    ++pos_;
    if (!is_slice) {
      if (!parts[0]) Error("expected a subscript");
      auto item = std::make_unique<ItemExpr>(line);
      item->object = std::move(object);
      item->index = std::move(parts[0]);
      return item;
    }
    auto slice = std::make_unique<SliceExpr>(line);
    slice->object = std::move(object);
    slice->start = std::move(parts[0]);
    slice->stop = std::move(parts[1]);
    slice->step = std::move(parts[2]);
    return slice;
  }

  CallArgExprs ParseCallArgs() {
    CallArgExprs args;
    ExpectOp("(");
    while (!SkipOp(")")) {
      if (!args.positional.empty() || !args.keyword.empty()) {
        ExpectOp(",");
        if (SkipOp(")")) break;
      }
      if (Cur().kind == Kind::kName && Peek().kind == Kind::kOp && Peek().text == "=") {
        std::string name = tokens_[pos_].text;
        pos_ += 2;
        args.keyword.emplace_back(std::move(name), ParseExpression());
      } else {
        if (!args.keyword.empty()) Error("positional argument after keyword argument");
        args.positional.push_back(ParseExpression());
      }
    }
    return args;
  }

  ExprPtr ParseCall(ExprPtr callee) {
    auto call = std::make_unique<CallExpr>(Cur().line);
    call->callee = std::move(callee);
    call->args = ParseCallArgs();
    return call;
  }

  std::unique_ptr<FilterExpr> ParseFilter(ExprPtr input) {
    auto filter = std::make_unique<FilterExpr>(Cur().line);
    filter->input = std::move(input);
    filter->name = ExpectName();
    while (SkipOp(".")) filter->name += "." + ExpectName();
    if (!HasFilter(filter->name)) {
      --pos_;
      Error("no filter named '" + filter->name + "'");
    }
    if (IsOp("(")) filter->args = ParseCallArgs();
    return filter;
  }

  ExprPtr ParseFilterExpr(ExprPtr node) {
    while (true) {
      if (SkipOp("|")) {
        node = ParseFilter(std::move(node));
      } else if (IsName("is")) {
        auto test = std::make_unique<TestExpr>(Cur().line);
        ++pos_;
        test->input = std::move(node);
        test->negated = SkipName("not");
        test->name = ExpectName();
        while (SkipOp(".")) test->name += "." + ExpectName();
        if (!HasTest(test->name)) {
          --pos_;
          Error("no test named '" + test->name + "'");
        }
        if (IsOp("(")) {
          test->args = ParseCallArgs();
        } else if ((Cur().kind == Kind::kName || Cur().kind == Kind::kString || Cur().kind == Kind::kInt ||
                    Cur().kind == Kind::kFloat || IsOp("(") || IsOp("[") || IsOp("{")) &&
                   !IsName("else") && !IsName("or") && !IsName("and")) {
          if (IsName("is")) Error("You cannot chain multiple tests with is");
          test->args.positional.push_back(ParsePostfix(ParsePrimary()));
        }
        node = std::move(test);
      } else if (IsOp("(")) {
        node = ParseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

}  // namespace

Body Parse(std::string_view source) { return Parser(Lex(source)).ParseTemplate(); }

}  // namespace sinew::jinja
