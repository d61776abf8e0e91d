#include "sinew/model/gguf_writer.h"

#include <cstdio>
#include <cstring>

#include "quant/quants.h"

namespace sinew::model {
namespace {

template <typename T>
void Put(std::string& out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out.append(buf, sizeof(T));
}

void PutString(std::string& out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out.append(s);
}

void PutKey(std::string& out, const std::string& key, GgufValueType type) {
  PutString(out, key);
  Put<uint32_t>(out, static_cast<uint32_t>(type));
}

}  // namespace

void GgufWriter::SetUint32(const std::string& key, uint32_t v) {
  PutKey(kv_bytes_, key, GgufValueType::kUint32);
  Put(kv_bytes_, v);
  ++n_kv_;
}
void GgufWriter::SetInt32(const std::string& key, int32_t v) {
  PutKey(kv_bytes_, key, GgufValueType::kInt32);
  Put(kv_bytes_, v);
  ++n_kv_;
}
void GgufWriter::SetUint64(const std::string& key, uint64_t v) {
  PutKey(kv_bytes_, key, GgufValueType::kUint64);
  Put(kv_bytes_, v);
  ++n_kv_;
}
void GgufWriter::SetFloat32(const std::string& key, float v) {
  PutKey(kv_bytes_, key, GgufValueType::kFloat32);
  Put(kv_bytes_, v);
  ++n_kv_;
}
void GgufWriter::SetBool(const std::string& key, bool v) {
  PutKey(kv_bytes_, key, GgufValueType::kBool);
  Put<uint8_t>(kv_bytes_, v ? 1 : 0);
  ++n_kv_;
}
void GgufWriter::SetString(const std::string& key, const std::string& v) {
  PutKey(kv_bytes_, key, GgufValueType::kString);
  PutString(kv_bytes_, v);
  ++n_kv_;
}
void GgufWriter::SetStringArray(const std::string& key, const std::vector<std::string>& v) {
  PutKey(kv_bytes_, key, GgufValueType::kArray);
  Put<uint32_t>(kv_bytes_, static_cast<uint32_t>(GgufValueType::kString));
  Put<uint64_t>(kv_bytes_, v.size());
  for (const std::string& s : v) PutString(kv_bytes_, s);
  ++n_kv_;
}
void GgufWriter::SetFloat32Array(const std::string& key, const std::vector<float>& v) {
  PutKey(kv_bytes_, key, GgufValueType::kArray);
  Put<uint32_t>(kv_bytes_, static_cast<uint32_t>(GgufValueType::kFloat32));
  Put<uint64_t>(kv_bytes_, v.size());
  for (float x : v) Put(kv_bytes_, x);
  ++n_kv_;
}
void GgufWriter::SetInt32Array(const std::string& key, const std::vector<int32_t>& v) {
  PutKey(kv_bytes_, key, GgufValueType::kArray);
  Put<uint32_t>(kv_bytes_, static_cast<uint32_t>(GgufValueType::kInt32));
  Put<uint64_t>(kv_bytes_, v.size());
  for (int32_t x : v) Put(kv_bytes_, x);
  ++n_kv_;
}

void GgufWriter::AddTensor(const std::string& name, GgmlType type,
                           const std::vector<int64_t>& shape, std::string data) {
  tensors_.push_back(Tensor{name, type, shape, std::move(data)});
}

std::string GgufWriter::ToBytes() const {
  std::string out;
  Put<uint32_t>(out, 0x46554747);
  Put<uint32_t>(out, 3);
  Put<uint64_t>(out, tensors_.size());
  uint64_t n_kv = n_kv_ + (alignment_ != GgufFile::kDefaultAlignment ? 1 : 0);
  Put<uint64_t>(out, n_kv);
  out += kv_bytes_;
  if (alignment_ != GgufFile::kDefaultAlignment) {
    PutKey(out, "general.alignment", GgufValueType::kUint32);
    Put<uint32_t>(out, alignment_);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(out, t.name);
    Put<uint32_t>(out, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) Put<uint64_t>(out, static_cast<uint64_t>(d));
    Put<uint32_t>(out, static_cast<uint32_t>(t.type));
    Put<uint64_t>(out, offset);
    offset += (t.data.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_, '\0');
  for (const Tensor& t : tensors_) {
    out += t.data;
    out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_, '\0');
  }
  return out;
}

Status GgufWriter::WriteFile(const std::string& path) const {
  const std::string bytes = ToBytes();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::IOError("cannot create '" + path + "'");
  const size_t n = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const int rc = std::fclose(f);
  if (n != bytes.size() || rc != 0) return Status::IOError("cannot write '" + path + "'");
  return Status::Ok();
}

std::string EncodeTensorData(GgmlType type, const float* values, int64_t n) {
  std::string out(static_cast<size_t>(GgmlRowSize(type, n)), '\0');
  quant::QuantizeRow(static_cast<uint32_t>(type), values, out.data(), n);
  return out;
}

}  // namespace sinew::model
