// sinew_model_server_bench: what the server layer costs. Runs the same greedy generation
// (stories260K, "Once upon a time", N tokens) in-process through the Engine, and through a
// real sinew-model process over HTTP (non-streaming and SSE) and gRPC, and prints tokens/s
// and the ratio to the in-process figure (1.0 = the server adds nothing). Also prints the
// tokenizers' encode throughput on the shared vocab inputs.
//
// Usage: sinew_model_server_bench [tokens=256] [repeats=5]   (env SINEW_BIN_DIR, SINEW_SOURCE_DIR)
#include <grpcpp/grpcpp.h>

#include <boost/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "server_test_util.h"
#include "sinew/model/engine.h"
#include "sinew/model/gguf.h"
#include "sinew/model/tokenizer.h"
#include "sinew/proto/model.grpc.pb.h"

namespace {

using namespace sinew::model;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Best of `repeats` runs of `run`, which returns the tokens it generated.
template <typename F>
double BestTokensPerSecond(int repeats, F run) {
  double best = 0;
  for (int index = 0; index < repeats; ++index) {
    Clock::time_point start = Clock::now();
    int tokens = run();
    double elapsed = Seconds(start);
    if (tokens > 0 && elapsed > 0) best = std::max(best, tokens / elapsed);
  }
  return best;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

int Run(int tokens, int repeats) {
  const std::string model = testing::StoriesPath();
  EngineOptions options;
  options.n_threads = 1;
  auto engine = Engine::Load(model, options);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 1;
  }
  auto tokenizer = Tokenizer::FromGguf((*engine)->gguf());
  if (!tokenizer.ok()) return 1;
  std::vector<int32_t> prompt = (*tokenizer)->Encode("Once upon a time");
  SamplingParams greedy;
  greedy.greedy = true;
  greedy.max_tokens = tokens;
  double in_process = BestTokensPerSecond(repeats, [&] {
    auto result = (*engine)->Generate(prompt, greedy, nullptr);
    return result.ok() ? static_cast<int>(result->tokens.size()) : 0;
  });

  std::string error;
  auto server = testing::ServerProcess::Start({}, &error);
  if (server == nullptr) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  const std::string body = R"({"prompt":"Once upon a time","temperature":0,"max_tokens":)" +
                           std::to_string(tokens);
  auto http = [&](bool stream) {
    return BestTokensPerSecond(repeats, [&] {
      auto result = testing::HttpCall(
          server->http_port(), "POST", "/v1/completions",
          body + (stream ? R"(,"stream":true,"stream_options":{"include_usage":true}})" : "}"));
      if (result.status != 200) return 0;
      // The usage object: the last JSON event of a stream, or the body.
      std::string usage_json = result.body;
      if (stream) {
        std::vector<std::string> events = testing::SseData(result.body);
        if (events.size() < 2) return 0;
        usage_json = events[events.size() - 2];
      }
      return static_cast<int>(
          boost::json::parse(usage_json).at("usage").at("completion_tokens").as_int64());
    });
  };
  double http_plain = http(false);
  double http_stream = http(true);
  auto stub = sinew::v1::ModelService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(server->grpc_port()), grpc::InsecureChannelCredentials()));
  double grpc_stream = BestTokensPerSecond(repeats, [&] {
    sinew::v1::GenerateRequest request;
    request.set_prompt("Once upon a time");
    request.set_max_tokens(tokens);
    request.set_temperature(0);
    grpc::ClientContext context;
    auto reader = stub->Generate(&context, request);
    int count = 0;
    for (sinew::v1::GenerateResponse message; reader->Read(&message);) count += message.token_ids_size();
    return reader->Finish().ok() ? count : 0;
  });

  std::printf("stories260K greedy up to %d tokens (all paths stop at EOS: same tokens), "
              "1 thread, best of %d;\nper-request costs (connection, prompt) included\n",
              tokens, repeats);
  std::printf("%-28s %10s %8s\n", "path", "tok/s", "ratio");
  std::printf("%-28s %10.1f %8.3f\n", "engine in-process", in_process, 1.0);
  std::printf("%-28s %10.1f %8.3f\n", "HTTP /v1/completions", http_plain, http_plain / in_process);
  std::printf("%-28s %10.1f %8.3f\n", "HTTP /v1/completions SSE", http_stream, http_stream / in_process);
  std::printf("%-28s %10.1f %8.3f\n", "gRPC Generate", grpc_stream, grpc_stream / in_process);

  std::printf("\ntokenizer encode throughput (shared vocab inputs x20)\n");
  const char* source = std::getenv("SINEW_SOURCE_DIR");
  for (const char* name : {"llama-spm", "gpt-2", "deepseek-coder"}) {
    std::string base = std::string(source ? source : ".") + "/../shared/models/vocab/ggml-vocab-" + name + ".gguf";
    auto file = GgufFile::Open(base);
    if (!file.ok()) continue;
    auto vocab_tokenizer = Tokenizer::FromGguf(**file);
    if (!vocab_tokenizer.ok()) continue;
    std::string text;
    std::string input = ReadAll(base + ".inp");
    for (int copy = 0; copy < 20; ++copy) text += input;
    Clock::time_point start = Clock::now();
    size_t count = (*vocab_tokenizer)->Encode(text, {.add_special = false}).size();
    double elapsed = Seconds(start);
    std::printf("%-16s %8.2f MB/s %10.0f tokens/s\n", name, text.size() / elapsed / 1e6, count / elapsed);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int tokens = argc > 1 ? std::atoi(argv[1]) : 256;
  int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  return Run(std::max(1, tokens), std::max(1, repeats));
}
