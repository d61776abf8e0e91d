// Internal to the GGUF reader: metadata values and a bounds-checked cursor over
// the file image. Every read checks the remaining length first.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "sinew/model/gguf.h"

namespace sinew::model::gguf_internal {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian

// A metadata value: scalars are decoded, strings and arrays point into the image.
struct Value {
  GgufValueType type = GgufValueType::kUint8;
  uint64_t u = 0;  // unsigned integers, bool
  int64_t i = 0;   // signed integers
  double f = 0;    // floats
  std::string_view s;
  // Arrays.
  GgufValueType elem_type = GgufValueType::kUint8;
  uint64_t count = 0;
  const uint8_t* elems = nullptr;  // start of the elements in the image
  std::vector<std::string_view> strings;  // decoded string arrays
};

inline size_t ScalarSize(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64: return 8;
    default: return 0;
  }
}

inline bool IsInteger(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8: case GgufValueType::kInt8: case GgufValueType::kUint16:
    case GgufValueType::kInt16: case GgufValueType::kUint32: case GgufValueType::kInt32:
    case GgufValueType::kUint64: case GgufValueType::kInt64: case GgufValueType::kBool:
      return true;
    default: return false;
  }
}

inline bool IsSigned(GgufValueType t) {
  return t == GgufValueType::kInt8 || t == GgufValueType::kInt16 ||
         t == GgufValueType::kInt32 || t == GgufValueType::kInt64;
}

// Bounds-checked little-endian reader over the image.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  template <typename T>
  Status Read(T* out, std::string_view what) {
    if (remaining() < sizeof(T)) return Truncated(what, sizeof(T));
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }
  Status ReadString(std::string_view* out, std::string_view what) {
    uint64_t len = 0;
    SINEW_RETURN_IF_ERROR(Read(&len, what));
    if (len > remaining()) {
      return Status::Corruption("GGUF: " + std::string(what) + " at offset " +
                                std::to_string(pos_ - 8) + " claims length " +
                                std::to_string(len) + " but only " +
                                std::to_string(remaining()) + " bytes remain");
    }
    *out = std::string_view(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return Status::Ok();
  }
  Status Skip(uint64_t n, std::string_view what) {
    if (n > remaining()) return Truncated(what, n);
    pos_ += n;
    return Status::Ok();
  }
  const uint8_t* here() const { return data_ + pos_; }

 private:
  Status Truncated(std::string_view what, uint64_t need) const {
    return Status::Corruption("GGUF: truncated file: " + std::string(what) + " at offset " +
                              std::to_string(pos_) + " needs " + std::to_string(need) +
                              " bytes, " + std::to_string(remaining()) + " remain");
  }
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

inline Status ReadScalar(Cursor& c, GgufValueType t, Value* v, std::string_view what) {
  switch (t) {
    case GgufValueType::kUint8: { uint8_t x = 0; SINEW_RETURN_IF_ERROR(c.Read(&x, what)); v->u = x; v->i = x; v->f = x; break; }
    case GgufValueType::kInt8: { int8_t x = 0; SINEW_RETURN_IF_ERROR(c.Read(&x, what)); v->i = x; v->f = x; break; }
    case GgufValueType::kUint16: { uint16_t x = 0; SINEW_RETURN_IF_ERROR(c.Read(&x, what)); v->u = x; v->i = x; v->f = x; break; }
    case GgufValueType::kInt16: { int16_t x = 0; SINEW_RETURN_IF_ERROR(c.Read(&x, what)); v->i = x; v->f = x; break; }
    case GgufValueType::kUint32: { uint32_t x = 0; SINEW_RETURN_IF_ERROR(c.Read(&x, what)); v->u = x; v->i = x; v->f = x; break; }
    case GgufValueType::kInt32: { int32_t x = 0; SINEW_RETURN_IF_ERROR(c.Read(&x, what)); v->i = x; v->f = x; break; }
    case GgufValueType::kUint64: { uint64_t x = 0; SINEW_RETURN_IF_ERROR(c.Read(&x, what)); v->u = x; v->f = static_cast<double>(x); break; }
    case GgufValueType::kInt64: { int64_t x = 0; SINEW_RETURN_IF_ERROR(c.Read(&x, what)); v->i = x; v->f = static_cast<double>(x); break; }
    case GgufValueType::kFloat32: { float x = 0; SINEW_RETURN_IF_ERROR(c.Read(&x, what)); v->f = x; break; }
    case GgufValueType::kFloat64: { double x = 0; SINEW_RETURN_IF_ERROR(c.Read(&x, what)); v->f = x; break; }
    case GgufValueType::kBool: {
      uint8_t x = 0;
      SINEW_RETURN_IF_ERROR(c.Read(&x, what));
      if (x > 1) return Status::Corruption("GGUF: " + std::string(what) + ": bool value " + std::to_string(x));
      v->u = x; v->i = x;
      break;
    }
    default: return Status::Internal("ReadScalar on non-scalar");
  }
  return Status::Ok();
}

}  // namespace sinew::model::gguf_internal
