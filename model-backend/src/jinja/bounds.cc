#include "bounds.h"

#include <string>
#include <utility>

#include "value.h"

namespace sinew::jinja {

namespace {
const model::RenderBounds kDefaultBounds;
thread_local const model::RenderBounds* current_bounds = &kDefaultBounds;
}  // namespace

const model::RenderBounds& Bounds() { return *current_bounds; }
ScopedBounds::ScopedBounds(const model::RenderBounds& bounds) : saved_(std::exchange(current_bounds, &bounds)) {}
ScopedBounds::~ScopedBounds() { current_bounds = saved_; }

void CheckTextSize(size_t bytes) {
  if (bytes > Bounds().max_text_bytes) {
    Fail("text of " + std::to_string(bytes) + " bytes is past the renderer's bound of " +
         std::to_string(Bounds().max_text_bytes) + " bytes");
  }
}

void CheckItems(size_t items) {
  if (items > Bounds().max_items) {
    Fail("a list of " + std::to_string(items) + " items is past the renderer's bound of " +
         std::to_string(Bounds().max_items) + " items");
  }
}

namespace {
[[noreturn]] void Overflow(const char* op) {
  Fail(std::string("integer overflow in '") + op + "': the result is past the 64-bit range");
}
int64_t MulIntsFor(const char* op, int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) Overflow(op);
  return r;
}
}  // namespace

int64_t AddInts(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) Overflow("+");
  return r;
}
int64_t SubInts(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) Overflow("-");
  return r;
}
int64_t MulInts(int64_t a, int64_t b) { return MulIntsFor("*", a, b); }
int64_t NegInt(int64_t a) {
  int64_t r = 0;
  if (__builtin_sub_overflow(int64_t{0}, a, &r)) Overflow("-");
  return r;
}
int64_t PowInts(int64_t base, int64_t exponent) {
  // By squaring: at most 63 steps, and a base of 0, 1 or -1 with any exponent is quick.
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = MulIntsFor("**", result, base);
    exponent >>= 1;
    if (exponent > 0) base = MulIntsFor("**", base, base);
  }
  return result;
}

}  // namespace sinew::jinja
