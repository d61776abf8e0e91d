// JinjaTemplate: renders a model's chat template (`tokenizer.chat_template`, Jinja2) the
// way Hugging Face transformers does: Jinja2's ImmutableSandboxedEnvironment with
// trim_blocks and lstrip_blocks on and the loopcontrols extension, `tojson` as
// json.dumps(ensure_ascii=False) without HTML escaping, and the globals
// `raise_exception(message)` and `strftime_now(format)` (plus Jinja's range, dict,
// namespace). Output is character for character what Python's jinja2 produces for the
// templates real models ship (tests compare against it). Every builtin filter and test
// of Jinja2 3.1 is supported; a construct outside the supported subset (macros with
// caller, include/import, recursive loops, the `%` operator on strings) is an error,
// never different text.
//
// Thread-safety: a JinjaTemplate is immutable; Render may be called from several threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <boost/json/object.hpp>

#include "sinew/status.h"

namespace sinew::model {

// Bounds of one render. A template comes with a model file and is not trusted to be
// small or quick: past a bound the render fails with a message instead of taking the
// process's memory or time (Python's jinja2 has none of these bounds).
struct RenderBounds {
  // Statements and loop iterations run: a few per message in real templates, so the bound
  // leaves room for any real conversation and stops a runaway loop within seconds.
  uint64_t max_steps = 1'000'000;
  size_t max_text_bytes = size_t{64} << 20;  // one string value, and the output
  size_t max_items = size_t{1} << 20;        // one list built by + or *
};

class JinjaTemplate {
 public:
  // Parses `source`. Errors: InvalidArgument "chat template line N: ..." for a syntax
  // error or an unknown filter or test.
  [[nodiscard]] static Result<JinjaTemplate> Parse(std::string_view source);

  // Renders with `variables` as the template's context (JSON values map to the Python
  // values json.loads gives). `now` is what strftime_now formats (local time).
  // Errors: InvalidArgument "chat template line N: ..." for raise_exception or a runtime
  // error (undefined attribute of an undefined value, a type error, ...), and for a render
  // past `bounds` or an integer result past int64 (Python's ints have no bound).
  [[nodiscard]] Result<std::string> Render(
      const boost::json::object& variables,
      std::chrono::system_clock::time_point now = std::chrono::system_clock::now(),
      const RenderBounds& bounds = {}) const;

 private:
  struct Program;
  explicit JinjaTemplate(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

}  // namespace sinew::model
