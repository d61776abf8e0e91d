// sinew-model: serves one GGUF model over an OpenAI-compatible HTTP API and gRPC.
//   sinew-model --model FILE.gguf [--host 127.0.0.1] [--port 8081] [--grpc-port 7703]
//               [--chat-template FILE.jinja] [--tls-cert F --tls-key F [--tls-ca F] | --insecure]
// Prints "http listening on HOST:PORT" and "grpc listening on HOST:PORT" on stdout once
// ready (port 0 picks a free port). Stops on SIGINT/SIGTERM.
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "api_handler.h"
#include "grpc_service.h"
#include "job_queue.h"
#include "metrics.h"
#include "model_runner.h"
#include "openai_response.h"
#include "sinew/grpc_tls.h"
#include "sinew/http/server.h"
#include "sinew/log.h"
#include "sinew/log_flags.h"

namespace {

int Run(int argc, char** argv) {
  using namespace sinew::model;
  CLI::App app{"sinew-model: the Sinew model server (OpenAI-compatible HTTP + gRPC Generate)"};
  std::string model_path;
  std::string model_id;
  sinew::http::ServerOptions http;
  http.port = 8081;
  http.max_header_bytes = 16 * 1024;
  http.server_name = "sinew-model";
  int grpc_port = 7703;
  EngineOptions engine;
  size_t queue_capacity = 256;
  ServingOptions serving;
  bool no_prefix_cache = false;
  int read_timeout_s = 30;
  int write_timeout_s = 60;
  app.add_option("--model", model_path, "GGUF model file")->required();
  std::string chat_template_path;
  app.add_option("--chat-template", chat_template_path,
                 "Jinja chat template file used instead of the model's tokenizer.chat_template");
  app.add_option("--model-id", model_id,
                 "model name in the API (default: file name without .gguf)");
  app.add_option("--host", http.host, "address for HTTP and gRPC")->capture_default_str();
  app.add_option("--port", http.port, "HTTP port (0: any free port)")->capture_default_str();
  app.add_option("--grpc-port", grpc_port, "gRPC port (0: any free port, -1: no gRPC)")
      ->capture_default_str();
  app.add_option("--threads", engine.n_threads, "compute threads (0: one per CPU)")
      ->capture_default_str();
  app.add_option("--ctx", engine.n_ctx, "context length (0: the model's, capped at 4096)")
      ->capture_default_str();
  app.add_option("--max-body-bytes", http.max_body_bytes, "largest request body")
      ->capture_default_str();
  app.add_option("--read-timeout", read_timeout_s, "seconds to read one request")
      ->capture_default_str();
  app.add_option("--write-timeout", write_timeout_s, "seconds for one write to a client")
      ->capture_default_str();
  app.add_option("--queue", queue_capacity, "generations waiting or running at most")
      ->capture_default_str();
  app.add_option("--max-running", serving.max_running,
                 "generations batched together at most (continuous batching)")
      ->capture_default_str();
  app.add_option("--kv-blocks", serving.n_blocks,
                 "paged KV cache blocks (0: on a GPU what --gpu-memory-fraction leaves after "
                 "the weights, on the CPU four full contexts)")
      ->capture_default_str();
  app.add_option("--gpu-memory-fraction", serving.gpu_memory_fraction,
                 "share of the GPU's memory in use at most once the KV cache is allocated")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--block-size", serving.block_size, "positions per KV block")
      ->capture_default_str();
  app.add_option("--swap-space", serving.swap_space_mib,
                 "MiB of host memory for the KV of preempted generations (0: recompute them)")
      ->check(CLI::Range(0.0, 16777216.0))
      ->capture_default_str();
  app.add_option("--step-tokens", serving.step_tokens, "tokens per batched step at most")
      ->capture_default_str();
  app.add_option("--prefill-chunk", serving.prefill_chunk,
                 "prompt tokens of one generation per step at most (chunked prefill)")
      ->capture_default_str();
  app.add_flag("--no-prefix-cache", no_prefix_cache, "do not reuse KV blocks of equal prefixes");
  bool no_step_graphs = false;
  app.add_flag("--no-step-graphs", no_step_graphs,
               "launch every kernel of every step (default: on a GPU, decode steps are padded "
               "to buckets of 1..128 sequences and replayed from one captured CUDA graph each)");
  bool no_device_sampling = false;
  app.add_flag("--no-device-sampling", no_device_sampling,
               "read every row's logits back and sample on the host (default: requests "
               "without penalties or top_logprobs are sampled by the backend, so a GPU "
               "sends back tokens, not logits)");
  bool no_overlap_steps = false;
  app.add_flag("--no-overlap-steps", no_overlap_steps,
               "wait for each step before planning the next (default: on a GPU, the next "
               "step is planned and queued while the last one runs, fed its tokens on the "
               "device)");
  bool no_batch_invariance = false;
  app.add_flag("--no-batch-invariance", no_batch_invariance,
               "skip the padding that makes batched outputs bit-identical to single ones");
  app.add_option("--spec-draft", serving.speculative_draft_tokens,
                 "prompt-lookup speculative decoding: tokens drafted per decode (0: off)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  bool spec_any_rows = false;
  app.add_flag("--spec-any-rows", spec_any_rows,
               "speculate in every decode, adding rows (default: only into the rows up to "
               "the step's next group of four, which the kernels compute at little cost)");
  app.add_option("--draft-model", serving.draft_model_path,
                 "a smaller GGUF with the model's vocabulary: it drafts for the decodes that "
                 "prompt lookup finds nothing for (same --spec-draft tokens and rows)")
      ->check(CLI::ExistingFile);
  bool draft_always = false;
  app.add_flag("--draft-always", draft_always,
               "draft --spec-draft tokens with --draft-model in every decode (default: as "
               "much as it pays by the measured acceptance and times)");
  bool no_prompt_lookup = false;
  app.add_flag("--no-prompt-lookup", no_prompt_lookup,
               "draft with --draft-model alone, not by looking the context up first");
  app.add_option("--device", engine.device, "cpu, cuda or cuda:N")->capture_default_str();
  std::string cache_type_k = "f16", cache_type_v = "f16";
  app.add_option("--cache-type-k", cache_type_k, "KV cache key type: f32, f16 or q8_0")
      ->capture_default_str();
  app.add_option("--cache-type-v", cache_type_v, "KV cache value type: f32, f16 or q8_0")
      ->capture_default_str();
  app.add_option("--tls-cert", http.tls.cert_file,
                 "PEM certificate chain: serve HTTPS only (reloaded on change and on SIGHUP)");
  app.add_option("--tls-key", http.tls.key_file, "PEM private key of --tls-cert");
  sinew::GrpcTlsOptions grpc_tls;
  app.add_option("--tls-ca", grpc_tls.ca_file,
                 "PEM CA bundle that gRPC clients' certificates must chain to: with --tls-cert, "
                 "the gRPC port is mTLS (required when TLS is on and gRPC is served)");
  int64_t tls_refresh_seconds = 60;
  app.add_option("--tls-refresh-seconds", tls_refresh_seconds,
                 "how often the gRPC port's certificate files are checked for changes")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}))
      ->capture_default_str();
  bool insecure = false;
  app.add_flag("--insecure", insecure, "allow plain HTTP and gRPC on a non-loopback --host");
  sinew::logging::LogFlags log_flags;
  sinew::logging::AddLogFlags(app, &log_flags);
  CLI11_PARSE(app, argc, argv);
  if (auto logs = sinew::logging::SetupLogging("sinew-model", log_flags.format, log_flags.level); !logs.ok()) {
    std::fprintf(stderr, "sinew-model: %s\n", logs.ToString().c_str());
    return 2;
  }
  if (http.tls.cert_file.empty() != http.tls.key_file.empty()) {
    std::fprintf(stderr, "sinew-model: --tls-cert and --tls-key go together\n");
    return 2;
  }
  if (!grpc_tls.ca_file.empty() && !http.tls.enabled()) {
    std::fprintf(stderr, "sinew-model: --tls-ca needs --tls-cert and --tls-key\n");
    return 2;
  }
  if (http.tls.enabled() && grpc_port >= 0 && grpc_tls.ca_file.empty()) {
    std::fprintf(stderr,
                 "sinew-model: with TLS on, the gRPC port is mTLS and needs --tls-ca (the CA "
                 "client certificates must chain to), or turn gRPC off with --grpc-port -1\n");
    return 2;
  }
  grpc_tls.cert_file = http.tls.enabled() ? http.tls.cert_file : "";
  grpc_tls.key_file = http.tls.enabled() ? http.tls.key_file : "";
  grpc_tls.refresh_interval = std::chrono::seconds(tls_refresh_seconds);
  if (auto files = sinew::CheckGrpcTlsFiles(grpc_tls); grpc_port >= 0 && !files.ok()) {
    std::fprintf(stderr, "sinew-model: %s\n", files.message().c_str());
    return 2;
  }
  if (auto plain = sinew::http::CheckPlainOnlyOnLoopback(http.host, http.tls.enabled(), insecure, "--insecure");
      !plain.ok()) {
    std::fprintf(stderr, "sinew-model: %s\n", plain.message().c_str());
    return 2;
  }
  for (auto [name, dst] : {std::pair{&cache_type_k, &engine.cache_type_k},
                           std::pair{&cache_type_v, &engine.cache_type_v}}) {
    auto type = ParseCacheType(*name);
    if (!type.ok()) {
      std::fprintf(stderr, "sinew-model: %s\n", type.status().ToString().c_str());
      return 2;
    }
    *dst = *type;
  }
  serving.prefix_cache = !no_prefix_cache;
  serving.device_sampling = !no_device_sampling;
  serving.step_graphs = !no_step_graphs;
  serving.overlap_steps = !no_overlap_steps;
  serving.batch_invariant = !no_batch_invariance;
  serving.speculative_free_rows_only = !spec_any_rows;
  serving.prompt_lookup = !no_prompt_lookup;
  serving.draft_model_adaptive = !draft_always;
  serving.max_waiting = static_cast<int32_t>(std::min<size_t>(queue_capacity, INT32_MAX));
  http.read_timeout = std::chrono::seconds(std::max(1, read_timeout_s));
  http.write_timeout = std::chrono::seconds(std::max(1, write_timeout_s));

  // Block the stop signals in every thread; the main thread waits for them below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A closed stdout (a supervisor or test that stopped reading) fails log writes instead
  // of killing the server.
  std::signal(SIGPIPE, SIG_IGN);
  // Only now: gRPC starts threads, which must inherit the blocked signals.
  std::shared_ptr<grpc::ServerCredentials> grpc_credentials;
  if (grpc_port >= 0) {
    auto credentials = sinew::GrpcServerCredentials(grpc_tls);
    if (!credentials.ok()) {
      std::fprintf(stderr, "sinew-model: %s\n", credentials.status().message().c_str());
      return 2;
    }
    grpc_credentials = *credentials;
  }

  std::string chat_template_source;
  if (!chat_template_path.empty()) {
    std::ifstream file(chat_template_path, std::ios::binary);
    std::stringstream text;
    text << file.rdbuf();
    if (!file || text.str().empty()) {
      std::fprintf(stderr, "sinew-model: --chat-template %s: cannot read the file or it is empty\n",
                   chat_template_path.c_str());
      return 1;
    }
    chat_template_source = text.str();
  }
  auto runner = ModelRunner::Load(model_path, engine, model_id, serving, chat_template_source);
  if (!runner.ok()) {
    std::fprintf(stderr, "sinew-model: %s\n", runner.status().ToString().c_str());
    return 1;
  }
  const ModelInfo& info = (*runner)->info();
  spdlog::info(
      "loaded {} ({}, {} params, {} layers, ctx {}, {} threads, device {} backend {}, KV {}/{}), "
      "chat template {}",
      (*runner)->model_id(), info.arch, info.n_params, info.n_layer, info.n_ctx, info.n_threads,
      info.device, info.simd, info.cache_type_k, info.cache_type_v,
      (*runner)->chat_template().name());

  Metrics metrics;
  auto queue = std::make_unique<JobQueue>(
      std::max<size_t>(1, queue_capacity),
      [&metrics](size_t depth) { metrics.SetQueueDepth(static_cast<int64_t>(depth)); },
      static_cast<size_t>(std::max(1, serving.max_running)));
  metrics.SetDevice(info.device, info.simd);
  metrics.SetServingStats([runner = runner->get()] { return runner->serving_stats(); });
  ApiHandler handler(**runner, metrics, *queue);
  http.error_body = [](int status, const std::string& code, const std::string& message) {
    return ErrorBody(message, status >= 500 ? "server_error" : "invalid_request_error", code);
  };
  auto server = sinew::http::Server::Start(
      http, [&handler](HttpRequest request, std::shared_ptr<ResponseStream> stream) {
        handler.Handle(std::move(request), std::move(stream));
      });
  if (!server.ok()) {
    std::fprintf(stderr, "sinew-model: %s\n", server.status().ToString().c_str());
    return 1;
  }
  std::printf("http listening on %s:%u\n", http.host.c_str(), (*server)->port());

  GrpcModelService grpc_service(**runner, metrics, *queue);
  std::unique_ptr<grpc::Server> grpc_server;
  if (grpc_port >= 0) {
    grpc::ServerBuilder builder;
    int selected_port = 0;
    builder.AddListeningPort(http.host + ":" + std::to_string(grpc_port), grpc_credentials,
                             &selected_port);
    builder.RegisterService(&grpc_service);
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a taken port is an error
    builder.SetMaxReceiveMessageSize(
        static_cast<int>(std::min<uint64_t>(http.max_body_bytes, INT32_MAX)));
    grpc_server = builder.BuildAndStart();
    if (grpc_server == nullptr || selected_port == 0) {
      std::fprintf(stderr, "sinew-model: cannot listen for gRPC on %s:%d\n", http.host.c_str(),
                   grpc_port);
      return 1;
    }
    std::printf("grpc listening on %s:%d\n", http.host.c_str(), selected_port);
  }
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  spdlog::info("signal {}: shutting down", signal_number);
  (*server)->Stop();
  if (grpc_server)
    grpc_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  queue.reset();  // joins the worker; jobs still queued are dropped
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "sinew-model: fatal: %s\n", error.what());
    return 1;
  }
}
