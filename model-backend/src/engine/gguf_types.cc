// GGUF value and tensor type tables, and the GgufFile convenience getters.
#include "sinew/model/gguf.h"

namespace sinew::model {

std::string_view GgufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8: return "uint8";
    case GgufValueType::kInt8: return "int8";
    case GgufValueType::kUint16: return "uint16";
    case GgufValueType::kInt16: return "int16";
    case GgufValueType::kUint32: return "uint32";
    case GgufValueType::kInt32: return "int32";
    case GgufValueType::kFloat32: return "float32";
    case GgufValueType::kBool: return "bool";
    case GgufValueType::kString: return "string";
    case GgufValueType::kArray: return "array";
    case GgufValueType::kUint64: return "uint64";
    case GgufValueType::kInt64: return "int64";
    case GgufValueType::kFloat64: return "float64";
  }
  return "unknown";
}

std::string_view GgmlTypeName(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return "F32";
    case GgmlType::kF16: return "F16";
    case GgmlType::kQ4_0: return "Q4_0";
    case GgmlType::kQ8_0: return "Q8_0";
    case GgmlType::kQ4_K: return "Q4_K";
    case GgmlType::kQ6_K: return "Q6_K";
    case GgmlType::kBF16: return "BF16";
  }
  return "unknown";
}

int64_t GgmlBlockSize(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16: return 1;
    case GgmlType::kQ4_0:
    case GgmlType::kQ8_0: return 32;
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K: return 256;
  }
  return 1;
}

int64_t GgmlTypeSize(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return 4;
    case GgmlType::kF16:
    case GgmlType::kBF16: return 2;
    case GgmlType::kQ4_0: return 18;
    case GgmlType::kQ8_0: return 34;
    case GgmlType::kQ4_K: return 144;
    case GgmlType::kQ6_K: return 210;
  }
  return 4;
}

bool IsSupportedGgmlType(uint32_t raw) {
  switch (raw) {
    case 0: case 1: case 2: case 8: case 12: case 14: case 30: return true;
    default: return false;
  }
}

Result<int64_t> GgufFile::GetIntOr(std::string_view key, int64_t fallback) const {
  if (!HasKey(key)) return fallback;
  return GetInt(key);
}
Result<double> GgufFile::GetFloatOr(std::string_view key, double fallback) const {
  if (!HasKey(key)) return fallback;
  return GetFloat(key);
}
Result<std::string_view> GgufFile::GetStringOr(std::string_view key,
                                               std::string_view fallback) const {
  if (!HasKey(key)) return fallback;
  return GetString(key);
}

}  // namespace sinew::model
