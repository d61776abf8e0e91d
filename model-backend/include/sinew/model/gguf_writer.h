// GgufWriter: builds a GGUF v3 file in memory (metadata + tensors) and writes it.
// Used by the tests and benchmarks to produce models with random weights, and by
// any tool that converts or quantizes models.
//
// Ownership: the writer copies every value and tensor it is given.
// Thread-safety: none; use one writer from one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sinew/model/gguf.h"
#include "sinew/status.h"

namespace sinew::model {

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t alignment = GgufFile::kDefaultAlignment) : alignment_(alignment) {}

  void SetUint32(const std::string& key, uint32_t v);
  void SetInt32(const std::string& key, int32_t v);
  void SetUint64(const std::string& key, uint64_t v);
  void SetFloat32(const std::string& key, float v);
  void SetBool(const std::string& key, bool v);
  void SetString(const std::string& key, const std::string& v);
  void SetStringArray(const std::string& key, const std::vector<std::string>& v);
  void SetFloat32Array(const std::string& key, const std::vector<float>& v);
  void SetInt32Array(const std::string& key, const std::vector<int32_t>& v);

  // `data` holds the tensor in its encoded form (GgmlRowSize(type, shape[0]) bytes
  // per row). REQUIRES: data.size() matches the shape and type.
  void AddTensor(const std::string& name, GgmlType type, const std::vector<int64_t>& shape,
                 std::string data);

  // The complete file image.
  std::string ToBytes() const;
  // Writes ToBytes() to `path`. IOError on failure.
  [[nodiscard]] Status WriteFile(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> shape;
    std::string data;
  };
  uint32_t alignment_;
  uint64_t n_kv_ = 0;
  std::string kv_bytes_;  // encoded key-value pairs
  std::vector<Tensor> tensors_;
};

// Encodes `n` F32 values as tensor data of `type` (quantizing for Q4_0, Q8_0,
// Q4_K, Q6_K). REQUIRES: n is a multiple of the type's block size.
std::string EncodeTensorData(GgmlType type, const float* values, int64_t n);

}  // namespace sinew::model
