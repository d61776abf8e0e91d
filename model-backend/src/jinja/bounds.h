// The bounds of one render (RenderBounds, include/sinew/model/jinja_template.h) and
// integer arithmetic that stays within int64: what keeps a template from a model file
// from taking the process's memory or time, or overflowing.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sinew/model/jinja_template.h"

namespace sinew::jinja {

// The bounds of the render running on this thread (JinjaTemplate::Render sets them with
// ScopedBounds; the defaults outside a render).
const model::RenderBounds& Bounds();
class ScopedBounds {
 public:
  explicit ScopedBounds(const model::RenderBounds& bounds);
  ~ScopedBounds();
  ScopedBounds(const ScopedBounds&) = delete;
  ScopedBounds& operator=(const ScopedBounds&) = delete;

 private:
  const model::RenderBounds* saved_;
};
// Fails unless a text of `bytes` is within Bounds().max_text_bytes.
void CheckTextSize(size_t bytes);
// Fails unless a list of `items` is within Bounds().max_items.
void CheckItems(size_t items);

// Integer arithmetic as Python's, within int64: a result past that range fails with a
// message (Python's ints have no bound; these do) instead of overflowing.
int64_t AddInts(int64_t a, int64_t b);
int64_t SubInts(int64_t a, int64_t b);
int64_t MulInts(int64_t a, int64_t b);
int64_t NegInt(int64_t a);
int64_t PowInts(int64_t base, int64_t exponent);  // exponent >= 0

}  // namespace sinew::jinja
