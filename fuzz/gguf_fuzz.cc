// The GGUF loader (model-backend/src/engine/gguf.cc: GgufFile::FromBytes), then what
// reads a parsed file: every metadata value by its type, every tensor's bytes, the
// vocabulary loader and tokenizer (LoadVocabFromGguf, Tokenizer::FromGguf) and the
// model loader (Model::Load on the CPU backend: hyperparameters and weight shapes).
// A file either fails with a message or loads; nothing reads outside the image.
#include <cstdint>
#include <memory>
#include <string>

#include "fuzz_util.h"
#include "model.h"
#include "sinew/model/backend.h"
#include "sinew/model/gguf.h"
#include "sinew/model/tokenizer.h"

namespace {

using sinew::model::GgufFile;
using sinew::model::GgufValueType;

void ReadEveryValue(const GgufFile& file) {
  for (std::string_view key : file.Keys()) {
    auto type = file.KeyType(key);
    if (!type.ok()) sinew::fuzz::Violated("a listed key has no type");
    switch (*type) {
      case GgufValueType::kString: (void)file.GetString(key); break;
      case GgufValueType::kFloat32:
      case GgufValueType::kFloat64: (void)file.GetFloat(key); break;
      case GgufValueType::kBool: (void)file.GetBool(key); break;
      case GgufValueType::kArray:
        (void)file.ArrayElementType(key);
        (void)file.ArraySize(key);
        (void)file.GetStringArray(key);
        (void)file.GetF32Array(key);
        (void)file.GetI32Array(key);
        break;
      default:
        (void)file.GetInt(key);
        (void)file.GetUint(key);
        break;
    }
  }
}

uint8_t TouchTensors(const GgufFile& file) {
  uint8_t sum = 0;
  for (const auto& t : file.tensors()) {
    if (t.size_bytes == 0) continue;
    sum ^= t.data[0];
    sum ^= t.data[t.size_bytes - 1];
  }
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = GgufFile::FromBytes(std::string(sinew::fuzz::Bytes(data, size)));
  if (!file.ok()) {
    if (file.status().message().empty()) sinew::fuzz::Violated("a refused file has no message");
    return 0;
  }
  ReadEveryValue(**file);
  volatile uint8_t sink = TouchTensors(**file);
  (void)sink;
  auto tokenizer = sinew::model::Tokenizer::FromGguf(**file);
  if (tokenizer.ok()) {
    const auto ids = (*tokenizer)->Encode("Hello world, <s> once upon a time\n\t 123 é 😀");
    (void)(*tokenizer)->Decode(ids);
  }
  static std::unique_ptr<sinew::model::Backend> backend = [] {
    sinew::model::CpuBackendOptions options;
    options.n_threads = 1;
    auto b = sinew::model::CreateCpuBackend(options);
    if (!b.ok()) sinew::fuzz::Violated("no CPU backend");
    return std::move(b).value();
  }();
  (void)sinew::model::Model::Load(**file, *backend);
  return 0;
}
