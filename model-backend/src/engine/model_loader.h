// LoadModel: what the Engine and the ServingEngine do alike to load a GGUF
// model: check the options, map the file, make the backend of
// EngineOptions::device, place the weights on it and describe the model
// (ModelInfo). Each keeps its own KV cache. CheckPrompt: the prompt checks
// both make before a generation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model.h"
#include "sinew/model/backend.h"
#include "sinew/model/engine.h"
#include "sinew/model/gguf.h"
#include "sinew/status.h"

namespace sinew::model {

struct LoadedModel {
  // Declared in the order they depend on each other: the model keeps pointers
  // into the file and frees its buffers through the backend.
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  ModelInfo info;
};

// Errors: InvalidArgument for n_ctx or n_batch out of range or a KV cache type
// the backend cannot hold; those of GgufFile::Open, CreateBackendForDevice and
// Model::Load (naming `path`).
[[nodiscard]] Result<LoadedModel> LoadModel(const std::string& path, const EngineOptions& options);

// InvalidArgument for an empty prompt or a token id outside the vocabulary;
// OutOfRange if the prompt leaves no room for a new token in the context.
[[nodiscard]] Status CheckPrompt(const std::vector<int32_t>& tokens, const ModelInfo& info);

}  // namespace sinew::model
