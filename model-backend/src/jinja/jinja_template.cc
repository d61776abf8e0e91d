#include "sinew/model/jinja_template.h"

#include "ast.h"
#include "bounds.h"
#include "builtins.h"

namespace sinew::model {

struct JinjaTemplate::Program {
  jinja::Body body;
};

namespace {
Status ErrorStatus(const jinja::JinjaError& error) {
  return Status::InvalidArgument("chat template line " + std::to_string(error.line) + ": " + error.message);
}
}  // namespace

Result<JinjaTemplate> JinjaTemplate::Parse(std::string_view source) {
  try {
    auto program = std::make_shared<Program>();
    program->body = jinja::Parse(source);
    return JinjaTemplate(std::move(program));
  } catch (const jinja::JinjaError& error) {
    return ErrorStatus(error);
  }
}

Result<std::string> JinjaTemplate::Render(const boost::json::object& variables,
                                          std::chrono::system_clock::time_point now,
                                          const RenderBounds& bounds) const {
  jinja::ScopedBounds scoped(bounds);
  jinja::DictData globals;
  jinja::AddGlobals(globals, now);
  jinja::Frame root;
  for (auto& [name, value] : globals.items) root.vars[name] = value;
  for (const auto& [name, value] : variables) {
    root.vars[std::string(name)] = jinja::Value::FromJson(value);
  }
  jinja::Context ctx;
  ctx.frame = &root;
  ctx.root = &root;
  std::string out;
  try {
    jinja::ExecBody(program_->body, ctx, out);
  } catch (const jinja::JinjaError& error) {
    return ErrorStatus(error);
  }
  return out;
}

}  // namespace sinew::model
