// GgufFile: a read-only view of a GGUF (v2/v3) model file, memory-mapped.
//
// Open() maps the file and validates every header field, string, array count,
// tensor shape, type, offset and size against the file before anything is
// exposed; a truncated, malformed or lying file gives a Status that names the
// offending field, never a crash or an out-of-bounds read. After a successful
// Open() every accessor is bounds-safe.
//
// Ownership: the GgufFile owns the mapping. Every string_view and data pointer
// it hands out points into the mapping and stays valid while the GgufFile lives.
//
// Thread-safety: immutable after Open(); all const methods may be called from
// several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sinew/status.h"

namespace sinew::model {

// Metadata value types, numbered as in the GGUF specification.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// Returns "uint8", "string", "array", ... ("unknown" for out-of-range values).
std::string_view GgufValueTypeName(GgufValueType type);

// Tensor element types, numbered as in ggml. Only the types listed here can be
// loaded; a file with any other tensor type is rejected by Open().
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ6_K = 14,
  kBF16 = 30,
};

// Returns "F32", "Q4_K", ... or "unknown".
std::string_view GgmlTypeName(GgmlType type);
// Elements per block (1 for F32/F16/BF16, 32 for Q4_0/Q8_0, 256 for k-quants).
int64_t GgmlBlockSize(GgmlType type);
// Bytes per block.
int64_t GgmlTypeSize(GgmlType type);
// Bytes of one row of `n` elements. REQUIRES: n is a multiple of the block size.
inline int64_t GgmlRowSize(GgmlType type, int64_t n) {
  return n / GgmlBlockSize(type) * GgmlTypeSize(type);
}
// True if `raw` is one of the GgmlType values above.
bool IsSupportedGgmlType(uint32_t raw);

// One tensor of the file.
struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  // Dimensions, fastest-varying first (ggml's ne[]): a weight matrix of a
  // linear layer mapping K inputs to N outputs has shape {K, N}.
  std::vector<int64_t> shape;
  int64_t n_elements = 0;
  uint64_t offset = 0;       // from the start of the data section
  uint64_t size_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping; size_bytes long, in bounds
};

class GgufFile {
 public:
  // Largest file the reader accepts for counts; counts beyond what the file can
  // hold are rejected before any allocation.
  static constexpr uint32_t kMaxDims = 4;
  static constexpr uint32_t kDefaultAlignment = 32;

  // Maps and validates `path`. Errors: NotFound / IOError for the file system,
  // Corruption (with the byte offset and field) for a malformed file,
  // Unimplemented for a valid file that uses an unsupported version or type.
  [[nodiscard]] static Result<std::unique_ptr<GgufFile>> Open(const std::string& path);

  // Validates a GGUF image held in memory (copied). Same errors as Open().
  [[nodiscard]] static Result<std::unique_ptr<GgufFile>> FromBytes(std::string bytes);

  virtual ~GgufFile() = default;

  virtual const std::string& path() const = 0;
  virtual uint32_t version() const = 0;
  virtual uint32_t alignment() const = 0;
  virtual uint64_t file_size() const = 0;
  // Byte offset of the (aligned) tensor data section in the file.
  virtual uint64_t data_offset() const = 0;

  // ---- metadata -------------------------------------------------------------
  // All keys in file order.
  virtual std::vector<std::string_view> Keys() const = 0;
  virtual bool HasKey(std::string_view key) const = 0;
  // NotFound if absent.
  virtual Result<GgufValueType> KeyType(std::string_view key) const = 0;
  // For an array key: the element type and count. NotFound / InvalidArgument.
  virtual Result<GgufValueType> ArrayElementType(std::string_view key) const = 0;
  virtual Result<uint64_t> ArraySize(std::string_view key) const = 0;

  // Typed getters. NotFound if the key is absent; InvalidArgument if it holds
  // another type or a value out of the target's range. GetInt/GetUint accept
  // any integer type (and bool), GetFloat accepts float32/float64 and integers.
  virtual Result<int64_t> GetInt(std::string_view key) const = 0;
  virtual Result<uint64_t> GetUint(std::string_view key) const = 0;
  virtual Result<double> GetFloat(std::string_view key) const = 0;
  virtual Result<bool> GetBool(std::string_view key) const = 0;
  virtual Result<std::string_view> GetString(std::string_view key) const = 0;
  // Arrays. Elements must be of the named type (GetI32Array also accepts any
  // integer element type whose values fit in int32).
  virtual Result<std::vector<std::string_view>> GetStringArray(std::string_view key) const = 0;
  virtual Result<std::vector<float>> GetF32Array(std::string_view key) const = 0;
  virtual Result<std::vector<int32_t>> GetI32Array(std::string_view key) const = 0;

  // Conveniences: the value, or `fallback` if the key is absent. A present key
  // of the wrong type is still an error.
  Result<int64_t> GetIntOr(std::string_view key, int64_t fallback) const;
  Result<double> GetFloatOr(std::string_view key, double fallback) const;
  Result<std::string_view> GetStringOr(std::string_view key, std::string_view fallback) const;

  // ---- tensors --------------------------------------------------------------
  virtual const std::vector<GgufTensorInfo>& tensors() const = 0;
  // nullptr if absent.
  virtual const GgufTensorInfo* FindTensor(std::string_view name) const = 0;
};

}  // namespace sinew::model
