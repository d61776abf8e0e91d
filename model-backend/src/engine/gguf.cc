// GGUF reader: mapping, header/metadata/tensor-info parsing and validation.
#include "sinew/model/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "gguf_cursor.h"

namespace sinew::model {

namespace {

using namespace gguf_internal;  // NOLINT: internal helpers of this reader

class GgufFileImpl final : public GgufFile {
 public:
  ~GgufFileImpl() override {
    if (map_ != nullptr) munmap(map_, map_size_);
  }

  Status Parse();

  const std::string& path() const override { return path_; }
  uint32_t version() const override { return version_; }
  uint32_t alignment() const override { return alignment_; }
  uint64_t file_size() const override { return size_; }
  uint64_t data_offset() const override { return data_offset_; }

  std::vector<std::string_view> Keys() const override { return key_order_; }
  bool HasKey(std::string_view key) const override { return kv_.count(std::string(key)) > 0; }
  Result<GgufValueType> KeyType(std::string_view key) const override {
    SINEW_ASSIGN_OR_RETURN(const Value* v, Find(key));
    return v->type;
  }
  Result<GgufValueType> ArrayElementType(std::string_view key) const override {
    SINEW_ASSIGN_OR_RETURN(const Value* v, FindTyped(key, GgufValueType::kArray));
    return v->elem_type;
  }
  Result<uint64_t> ArraySize(std::string_view key) const override {
    SINEW_ASSIGN_OR_RETURN(const Value* v, FindTyped(key, GgufValueType::kArray));
    return v->count;
  }

  Result<int64_t> GetInt(std::string_view key) const override {
    SINEW_ASSIGN_OR_RETURN(const Value* v, Find(key));
    if (!IsInteger(v->type)) return WrongType(key, v->type, "an integer");
    if (v->type == GgufValueType::kUint64 && v->u > static_cast<uint64_t>(INT64_MAX)) {
      return Status::InvalidArgument("GGUF key '" + std::string(key) + "' value " +
                                     std::to_string(v->u) + " does not fit in int64");
    }
    return v->type == GgufValueType::kUint64 ? static_cast<int64_t>(v->u) : v->i;
  }
  Result<uint64_t> GetUint(std::string_view key) const override {
    SINEW_ASSIGN_OR_RETURN(const Value* v, Find(key));
    if (!IsInteger(v->type)) return WrongType(key, v->type, "an integer");
    if (IsSigned(v->type)) {
      if (v->i < 0) {
        return Status::InvalidArgument("GGUF key '" + std::string(key) + "' is negative (" +
                                       std::to_string(v->i) + ")");
      }
      return static_cast<uint64_t>(v->i);
    }
    return v->u;
  }
  Result<double> GetFloat(std::string_view key) const override {
    SINEW_ASSIGN_OR_RETURN(const Value* v, Find(key));
    if (v->type == GgufValueType::kFloat32 || v->type == GgufValueType::kFloat64 ||
        (IsInteger(v->type) && v->type != GgufValueType::kBool)) {
      return v->f;
    }
    return WrongType(key, v->type, "a number");
  }
  Result<bool> GetBool(std::string_view key) const override {
    SINEW_ASSIGN_OR_RETURN(const Value* v, FindTyped(key, GgufValueType::kBool));
    return v->u != 0;
  }
  Result<std::string_view> GetString(std::string_view key) const override {
    SINEW_ASSIGN_OR_RETURN(const Value* v, FindTyped(key, GgufValueType::kString));
    return v->s;
  }
  Result<std::vector<std::string_view>> GetStringArray(std::string_view key) const override {
    SINEW_ASSIGN_OR_RETURN(const Value* v, FindArray(key, GgufValueType::kString));
    return v->strings;
  }
  Result<std::vector<float>> GetF32Array(std::string_view key) const override {
    SINEW_ASSIGN_OR_RETURN(const Value* v, FindArray(key, GgufValueType::kFloat32));
    std::vector<float> out(v->count);
    if (v->count > 0) std::memcpy(out.data(), v->elems, v->count * sizeof(float));
    return out;
  }
  Result<std::vector<int32_t>> GetI32Array(std::string_view key) const override;

  const std::vector<GgufTensorInfo>& tensors() const override { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const override {
    auto it = tensor_index_.find(std::string(name));
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
  }

  std::string path_;
  std::string owned_bytes_;  // FromBytes only
  void* map_ = nullptr;
  size_t map_size_ = 0;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;

 private:
  Result<const Value*> Find(std::string_view key) const {
    auto it = kv_.find(std::string(key));
    if (it == kv_.end()) {
      return Status::NotFound("GGUF metadata key '" + std::string(key) + "' not found");
    }
    return &it->second;
  }
  Result<const Value*> FindTyped(std::string_view key, GgufValueType t) const {
    SINEW_ASSIGN_OR_RETURN(const Value* v, Find(key));
    if (v->type != t) return WrongType(key, v->type, GgufValueTypeName(t));
    return v;
  }
  Result<const Value*> FindArray(std::string_view key, GgufValueType elem) const {
    SINEW_ASSIGN_OR_RETURN(const Value* v, FindTyped(key, GgufValueType::kArray));
    if (v->elem_type != elem) {
      return Status::InvalidArgument("GGUF key '" + std::string(key) + "' is an array of " +
                                     std::string(GgufValueTypeName(v->elem_type)) +
                                     ", expected an array of " +
                                     std::string(GgufValueTypeName(elem)));
    }
    return v;
  }
  static Status WrongType(std::string_view key, GgufValueType got, std::string_view want) {
    return Status::InvalidArgument("GGUF key '" + std::string(key) + "' has type " +
                                   std::string(GgufValueTypeName(got)) + ", expected " +
                                   std::string(want));
  }
  Status ParseValue(Cursor& c, Value* v, const std::string& key);
  Status ParseTensors(Cursor& c, uint64_t n_tensors);

  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::unordered_map<std::string, Value> kv_;
  std::vector<std::string_view> key_order_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

Result<std::vector<int32_t>> GgufFileImpl::GetI32Array(std::string_view key) const {
  SINEW_ASSIGN_OR_RETURN(const Value* v, FindTyped(key, GgufValueType::kArray));
  if (!IsInteger(v->elem_type) || v->elem_type == GgufValueType::kBool) {
    return Status::InvalidArgument("GGUF key '" + std::string(key) + "' is an array of " +
                                   std::string(GgufValueTypeName(v->elem_type)) +
                                   ", expected an array of integers");
  }
  const size_t es = ScalarSize(v->elem_type);
  std::vector<int32_t> out(v->count);
  for (uint64_t idx = 0; idx < v->count; ++idx) {
    Cursor c(v->elems + idx * es, es);
    Value x;
    SINEW_RETURN_IF_ERROR(ReadScalar(c, v->elem_type, &x, key));
    int64_t val = 0;
    if (v->elem_type == GgufValueType::kUint64) {
      if (x.u > static_cast<uint64_t>(INT32_MAX)) val = INT64_MAX;
      else val = static_cast<int64_t>(x.u);
    } else {
      val = x.i;
    }
    if (val < INT32_MIN || val > INT32_MAX) {
      return Status::InvalidArgument("GGUF key '" + std::string(key) + "' element " +
                                     std::to_string(idx) + " does not fit in int32");
    }
    out[idx] = static_cast<int32_t>(val);
  }
  return out;
}

Status GgufFileImpl::ParseValue(Cursor& c, Value* v, const std::string& key) {
  const std::string what = "value of key '" + key + "'";
  switch (v->type) {
    case GgufValueType::kString: return c.ReadString(&v->s, what);
    case GgufValueType::kArray: {
      uint32_t et = 0;
      SINEW_RETURN_IF_ERROR(c.Read(&et, what + " (array type)"));
      if (et > static_cast<uint32_t>(GgufValueType::kFloat64)) {
        return Status::Corruption("GGUF: key '" + key + "' has unknown array element type " +
                                  std::to_string(et));
      }
      v->elem_type = static_cast<GgufValueType>(et);
      if (v->elem_type == GgufValueType::kArray) {
        return Status::Unimplemented("GGUF: key '" + key + "' is a nested array");
      }
      SINEW_RETURN_IF_ERROR(c.Read(&v->count, what + " (array count)"));
      v->elems = c.here();
      if (v->elem_type == GgufValueType::kString) {
        // Each string needs at least its 8-byte length: bound the count first.
        if (v->count > c.remaining() / 8) {
          return Status::Corruption("GGUF: key '" + key + "' claims " + std::to_string(v->count) +
                                    " strings but only " + std::to_string(c.remaining()) +
                                    " bytes remain");
        }
        v->strings.resize(v->count);
        for (uint64_t idx = 0; idx < v->count; ++idx) {
          SINEW_RETURN_IF_ERROR(c.ReadString(&v->strings[idx], what));
        }
        return Status::Ok();
      }
      const size_t es = ScalarSize(v->elem_type);
      if (v->count > c.remaining() / es) {
        return Status::Corruption("GGUF: key '" + key + "' claims " + std::to_string(v->count) +
                                  " elements of " + std::to_string(es) + " bytes but only " +
                                  std::to_string(c.remaining()) + " bytes remain");
      }
      if (v->elem_type == GgufValueType::kBool) {
        for (uint64_t idx = 0; idx < v->count; ++idx) {
          if (v->elems[idx] > 1) {
            return Status::Corruption("GGUF: key '" + key + "' has a bool element " +
                                      std::to_string(v->elems[idx]));
          }
        }
      }
      return c.Skip(v->count * es, what);
    }
    default:
      if (static_cast<uint32_t>(v->type) > static_cast<uint32_t>(GgufValueType::kFloat64)) {
        return Status::Corruption("GGUF: key '" + key + "' has unknown value type " +
                                  std::to_string(static_cast<uint32_t>(v->type)));
      }
      return ReadScalar(c, v->type, v, what);
  }
}

Status GgufFileImpl::Parse() {
  Cursor c(data_, size_);
  uint32_t magic = 0;
  SINEW_RETURN_IF_ERROR(c.Read(&magic, "magic"));
  if (magic != kMagic) return Status::Corruption("GGUF: bad magic (not a GGUF file)");
  SINEW_RETURN_IF_ERROR(c.Read(&version_, "version"));
  if (version_ != 2 && version_ != 3) {
    return Status::Unimplemented("GGUF: unsupported version " + std::to_string(version_) +
                                 " (supported: 2, 3)");
  }
  uint64_t n_tensors = 0, n_kv = 0;
  SINEW_RETURN_IF_ERROR(c.Read(&n_tensors, "tensor count"));
  SINEW_RETURN_IF_ERROR(c.Read(&n_kv, "metadata count"));
  // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor
  // info at least 8 + 4 + 4 + 8 bytes.
  if (n_kv > c.remaining() / 13) {
    return Status::Corruption("GGUF: metadata count " + std::to_string(n_kv) +
                              " cannot fit in a file of " + std::to_string(size_) + " bytes");
  }
  if (n_tensors > c.remaining() / 24) {
    return Status::Corruption("GGUF: tensor count " + std::to_string(n_tensors) +
                              " cannot fit in a file of " + std::to_string(size_) + " bytes");
  }
  kv_.reserve(n_kv);
  for (uint64_t kv_idx = 0; kv_idx < n_kv; ++kv_idx) {
    std::string_view key;
    SINEW_RETURN_IF_ERROR(c.ReadString(&key, "metadata key " + std::to_string(kv_idx)));
    std::string key_str(key);
    if (kv_.count(key_str) > 0) return Status::Corruption("GGUF: duplicate key '" + key_str + "'");
    uint32_t type = 0;
    SINEW_RETURN_IF_ERROR(c.Read(&type, "type of key '" + key_str + "'"));
    if (type > static_cast<uint32_t>(GgufValueType::kFloat64)) {
      return Status::Corruption("GGUF: key '" + key_str + "' has unknown value type " +
                                std::to_string(type));
    }
    Value v;
    v.type = static_cast<GgufValueType>(type);
    SINEW_RETURN_IF_ERROR(ParseValue(c, &v, key_str));
    auto [it, inserted] = kv_.emplace(key_str, std::move(v));
    key_order_.push_back(it->first);
  }
  if (HasKey("general.alignment")) {
    auto a = GetUint("general.alignment");
    if (!a.ok()) return Status::Corruption("GGUF: general.alignment: " + a.status().message());
    if (*a == 0 || (*a & (*a - 1)) != 0 || *a > (1u << 20)) {
      return Status::Corruption("GGUF: general.alignment " + std::to_string(*a) +
                                " is not a power of two up to 1 MiB");
    }
    alignment_ = static_cast<uint32_t>(*a);
  }
  return ParseTensors(c, n_tensors);
}

Status GgufFileImpl::ParseTensors(Cursor& c, uint64_t n_tensors) {
  tensors_.resize(n_tensors);
  for (uint64_t t_idx = 0; t_idx < n_tensors; ++t_idx) {
    GgufTensorInfo& t = tensors_[t_idx];
    std::string_view name;
    SINEW_RETURN_IF_ERROR(c.ReadString(&name, "tensor name " + std::to_string(t_idx)));
    t.name = std::string(name);
    if (tensor_index_.count(t.name) > 0) {
      return Status::Corruption("GGUF: duplicate tensor '" + t.name + "'");
    }
    tensor_index_[t.name] = t_idx;
    const std::string what = "tensor '" + t.name + "'";
    uint32_t n_dims = 0;
    SINEW_RETURN_IF_ERROR(c.Read(&n_dims, what + " n_dims"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return Status::Corruption("GGUF: " + what + " has " + std::to_string(n_dims) +
                                " dimensions (must be 1.." + std::to_string(kMaxDims) + ")");
    }
    t.shape.resize(n_dims);
    uint64_t n_el = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = 0;
      SINEW_RETURN_IF_ERROR(c.Read(&ne, what + " dimension"));
      if (ne == 0 || ne > (uint64_t{1} << 40) || n_el > (uint64_t{1} << 48) / ne) {
        return Status::Corruption("GGUF: " + what + " has an invalid dimension " +
                                  std::to_string(ne));
      }
      n_el *= ne;
      t.shape[d] = static_cast<int64_t>(ne);
    }
    t.n_elements = static_cast<int64_t>(n_el);
    uint32_t type = 0;
    SINEW_RETURN_IF_ERROR(c.Read(&type, what + " type"));
    if (!IsSupportedGgmlType(type)) {
      return Status::Unimplemented("GGUF: " + what + " has unsupported tensor type " +
                                   std::to_string(type) +
                                   " (supported: F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q6_K)");
    }
    t.type = static_cast<GgmlType>(type);
    const int64_t bs = GgmlBlockSize(t.type);
    if (t.shape[0] % bs != 0) {
      return Status::Corruption("GGUF: " + what + " row length " + std::to_string(t.shape[0]) +
                                " is not a multiple of the " + std::string(GgmlTypeName(t.type)) +
                                " block size " + std::to_string(bs));
    }
    t.size_bytes = n_el / static_cast<uint64_t>(bs) * static_cast<uint64_t>(GgmlTypeSize(t.type));
    SINEW_RETURN_IF_ERROR(c.Read(&t.offset, what + " offset"));
    if (t.offset % alignment_ != 0) {
      return Status::Corruption("GGUF: " + what + " offset " + std::to_string(t.offset) +
                                " is not aligned to " + std::to_string(alignment_));
    }
  }
  uint64_t data_start = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (data_start > size_) {
    if (n_tensors == 0) data_start = size_;
    else return Status::Corruption("GGUF: truncated file: no tensor data section");
  }
  data_offset_ = data_start;
  const uint64_t data_size = size_ - data_start;
  // Check bounds and that no two tensors overlap.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  ranges.reserve(tensors_.size());
  for (GgufTensorInfo& t : tensors_) {
    if (t.offset > data_size || t.size_bytes > data_size - t.offset) {
      return Status::Corruption("GGUF: tensor '" + t.name + "' data [" + std::to_string(t.offset) +
                                ", +" + std::to_string(t.size_bytes) +
                                ") lies outside the data section of " + std::to_string(data_size) +
                                " bytes (truncated file or lying size)");
    }
    t.data = data_ + data_start + t.offset;
    ranges.emplace_back(t.offset, t.offset + t.size_bytes);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t r = 1; r < ranges.size(); ++r) {
    if (ranges[r].first < ranges[r - 1].second) {
      return Status::Corruption("GGUF: tensor data ranges overlap at offset " +
                                std::to_string(ranges[r].first));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string msg = "cannot open '" + path + "': " + std::strerror(err);
    return err == ENOENT ? Status::NotFound(msg) : Status::IOError(msg);
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Status::IOError("cannot stat '" + path + "': " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument("'" + path + "' is not a regular file");
  }
  auto file = std::make_unique<GgufFileImpl>();
  file->path_ = path;
  file->size_ = static_cast<uint64_t>(st.st_size);
  if (file->size_ == 0) {
    ::close(fd);
    return Status::Corruption("GGUF: '" + path + "' is empty");
  }
  void* map = mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);
  if (map == MAP_FAILED) {
    return Status::IOError("cannot mmap '" + path + "': " + std::strerror(err));
  }
  file->map_ = map;
  file->map_size_ = file->size_;
  file->data_ = static_cast<const uint8_t*>(map);
  Status s = file->Parse();
  if (!s.ok()) return s.WithContext(path);
  return std::unique_ptr<GgufFile>(std::move(file));
}

Result<std::unique_ptr<GgufFile>> GgufFile::FromBytes(std::string bytes) {
  auto file = std::make_unique<GgufFileImpl>();
  file->path_ = "<memory>";
  file->owned_bytes_ = std::move(bytes);
  file->data_ = reinterpret_cast<const uint8_t*>(file->owned_bytes_.data());
  file->size_ = file->owned_bytes_.size();
  SINEW_RETURN_IF_ERROR(file->Parse());
  return std::unique_ptr<GgufFile>(std::move(file));
}

}  // namespace sinew::model
