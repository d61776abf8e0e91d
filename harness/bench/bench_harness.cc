// bench_harness: measures the harness against its references, in one process.
//
//  1. Time from POST /v1/sessions to the model's first token, against the model's own
//     time to first token measured alone in the same run (target ratio <= 1.1: nothing,
//     in particular no sandbox start, sits on that path). The model is an
//     OpenAI-compatible streaming server inside this process that waits --ttft-ms before
//     its first token; both paths are timed from their start to the moment that server
//     sends the first token (same clock, same event).
//  2. Sessions submitted per second, with wrk against POST /v1/sessions.
//  3. --sessions (default 1000) concurrent sessions against the scripted model in one
//     harness process: memory per session (peak RSS growth / sessions) and events/s.
//
// Usage: bench_harness [--ttft-ms 20] [--samples 20] [--sessions 1000] [--wrk-seconds 5]
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>

#include "sinew/harness/model_client.h"
#include "test_util.h"

namespace sinew::harness::bench {
namespace {

using Clock = std::chrono::steady_clock;
namespace json = boost::json;
using test::Api;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

long RssKb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return 0;
}

std::string Chunk(const std::string& content, const char* finish) {
  json::object delta;
  if (!content.empty()) delta["content"] = content;
  json::object choice{{"index", 0}, {"delta", delta}};
  choice["finish_reason"] = finish == nullptr ? json::value(nullptr) : json::value(finish);
  return "data: " + json::serialize(json::object{{"choices", json::array{choice}}}) + "\n\n";
}

int Arg(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == name) return std::atoi(argv[i + 1]);
  }
  return fallback;
}

int Run(int argc, char** argv) {
  const int ttft_ms = Arg(argc, argv, "--ttft-ms", 20);
  const int samples = Arg(argc, argv, "--samples", 20);
  const int sessions = Arg(argc, argv, "--sessions", 1000);
  const int wrk_seconds = Arg(argc, argv, "--wrk-seconds", 5);
  testing::TempDir dir("sinew-bench");

  // The model: an OpenAI-compatible streaming server in this process.
  std::atomic<int64_t> first_token_ns{0};
  test::TestHttpServer model([&](const test::TestHttpServer::Request&) {
    test::TestHttpServer::Response r;
    r.content_type = "text/event-stream";
    r.delay_ms = ttft_ms;  // prefill
    // The first chunk leaves right after the delay; record when.
    first_token_ns = (Clock::now() + std::chrono::milliseconds(ttft_ms)).time_since_epoch().count();
    r.chunks = {Chunk("Hello", nullptr), Chunk(" there", nullptr), Chunk("", "stop"), "data: [DONE]\n\n"};
    return r;
  });
  // A target for the tool calls of the concurrent sessions.
  test::TestHttpServer target([](const test::TestHttpServer::Request&) {
    test::TestHttpServer::Response r;
    r.content_type = "text/plain";
    r.body = "ok";
    return r;
  });

  // Each phase gets a fresh store, so that no phase inherits another's sessions.
  int store_count = 0;
  auto new_store = [&](const std::string& durability) {
    const std::string db = dir.Sub("db" + std::to_string(store_count++));
    auto p = std::make_unique<testing::Subprocess>(std::vector<std::string>{
        testing::BinaryPath("sinew-store"), "--db", db, "--listen", "127.0.0.1:0", "--durability", durability});
    auto line = p->WaitForLine("listening on", std::chrono::seconds(30));
    std::string address = line ? line->substr(line->rfind(' ') + 1) : "";
    return std::make_pair(std::move(p), address);
  };
  test::WriteFile(dir.Sub("fast.json"), R"({"loop": true, "responses": [{"text": "done"}]})");
  test::WriteFile(dir.Sub("concurrent.json"), R"({"responses": [
    {"text": "step one", "delay_ms": 1000, "tool_calls": [{"name": "http_request", "input": {"url": ")" + target.url() + R"(/a"}}]},
    {"text": "step two", "delay_ms": 1000, "tool_calls": [{"name": "http_request", "input": {"url": ")" + target.url() + R"(/b"}}]},
    {"text": "finished", "delay_ms": 1000}]})");
  std::string extra_models;  // the in-house model, when built (phase 1b)
  auto config = [&](int workers, const std::string& store_address) {
    return R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store_address + R"("},
      "api_keys": {"bench": "bench"}, "default_model": "fast", "workers": )" + std::to_string(workers) + R"(,
      "models": {)" + extra_models + R"("served": {"kind": "openai", "base_url": ")" + model.url() + R"(", "max_retries": 0},
                 "fast": {"kind": "scripted", "script": ")" + dir.Sub("fast.json") + R"("},
                 "concurrent": {"kind": "scripted", "script": ")" + dir.Sub("concurrent.json") + R"("}},
      "http_request": {"allow": [{"host": "127.0.0.1:)" + std::to_string(target.port()) + R"("}]},
      "lease_ttl_ms": 30000, "scan_interval_ms": 60000, "max_connections": 4096})";
  };

  // 1. Time to first token: the model alone, then through the harness.
  ModelEndpointConfig direct;
  direct.kind = "openai";
  direct.base_url = model.url();
  direct.model = "served";
  direct.max_retries = 0;
  auto client = MakeModelClient(direct, "");
  std::vector<double> alone, through;
  for (int i = 0; i < samples; ++i) {
    ModelCall call;
    call.model = "served";
    ChatMessage m;
    m.text = "hi";
    call.messages = {m};
    const auto start = Clock::now();
    auto reply = (*client)->Complete(call, nullptr);
    if (!reply.ok()) return std::fprintf(stderr, "model: %s\n", reply.status().ToString().c_str()), 1;
    alone.push_back(Ms(Clock::duration(first_token_ns.load()) - start.time_since_epoch()));
  }
  const double ttft_alone = Median(alone);
  for (const std::string durability : {"sync", "async"}) {
    auto store = new_store(durability);
    test::HarnessProcess harness(dir.Sub("h1.json"), config(64, store.second));
    if (harness.address.empty()) return 1;
    through.clear();
    for (int i = 0; i < samples; ++i) {
      first_token_ns = 0;
      const auto start = Clock::now();
      auto r = Api("POST", harness.url() + "/v1/sessions", "bench", R"({"prompt": "hi", "model": "served"})");
      if (r.status != 201) return std::fprintf(stderr, "submit: %s\n", r.body.c_str()), 1;
      while (first_token_ns.load() == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      through.push_back(Ms(Clock::duration(first_token_ns.load()) - start.time_since_epoch()));
      const std::string id(r.json.at("session").at("id").as_string());
      test::WaitForStatus(harness.url(), "bench", id, "completed,failed");
    }
    const double ttft_through = Median(through);
    std::printf("time to first token, median of %d (store durability %s): model alone %.2f ms, "
                "POST /v1/sessions -> first token %.2f ms, ratio %.3f (target <= 1.1), overhead %.2f ms\n",
                samples, durability.c_str(), ttft_alone, ttft_through, ttft_through / ttft_alone,
                ttft_through - ttft_alone);
  }

  // 1b. The same against the in-house model (sinew-model over stories260K), when built.
  // Its first token is timed from the log: the model_request event's store timestamp
  // plus the response's time_to_first_token_ms (millisecond resolution).
  const char* source = std::getenv("SINEW_SOURCE_DIR");
  const std::string gguf = std::getenv("SINEW_MODEL_FILE") != nullptr
                               ? std::getenv("SINEW_MODEL_FILE")
                               : std::string(source != nullptr ? source : ".") + "/../shared/models/stories260K.gguf";
  const std::string model_bin = testing::BinaryPath("sinew-model");
  if (access(model_bin.c_str(), X_OK) == 0 && access(gguf.c_str(), R_OK) == 0) {
    testing::Subprocess served({model_bin, "--model", gguf, "--port", "0", "--grpc-port", "-1"});
    auto line = served.WaitForLine("http listening on", std::chrono::seconds(60));
    if (line) {
      const std::string url = "http://" + line->substr(line->rfind(' ') + 1) + "/v1";
      ModelEndpointConfig real;
      real.kind = "openai";
      real.base_url = url;
      real.model = "stories260K";
      real.tools = false;
      auto real_client = MakeModelClient(real, "");
      std::vector<double> real_alone, real_through;
      for (int i = 0; i < samples; ++i) {
        ModelCall call;
        call.model = "stories260K";
        call.max_output_tokens = 16;
        ChatMessage m;
        m.text = "Once upon a time";
        call.messages = {m};
        const auto start = Clock::now();
        Clock::time_point first{};
        auto reply = (*real_client)->Complete(call, [&](std::string_view) {
          if (first == Clock::time_point{}) first = Clock::now();
        });
        if (reply.ok() && first != Clock::time_point{}) real_alone.push_back(Ms(first - start));
      }
      extra_models = R"("real": {"kind": "openai", "base_url": ")" + url +
                     R"(", "model": "stories260K", "tools": false, "context_tokens": 256, "max_output_tokens": 16},)";
      auto store = new_store("sync");
      test::HarnessProcess harness(dir.Sub("h1b.json"), config(64, store.second));
      for (int i = 0; i < samples && !harness.address.empty(); ++i) {
        const double t0 = std::chrono::duration<double, std::milli>(
                              std::chrono::system_clock::now().time_since_epoch()).count();
        auto r = Api("POST", harness.url() + "/v1/sessions", "bench", R"({"prompt": "Once upon a time", "model": "real"})");
        if (r.status != 201) break;
        const std::string id(r.json.at("session").at("id").as_string());
        test::WaitForStatus(harness.url(), "bench", id, "completed,failed");
        double request_ms = 0, ttft = -1;
        for (const auto& e : test::AllEvents(harness.url(), "bench", id)) {
          if (e.contains("model_request")) request_ms = std::stod(std::string(e.at("timestamp_unix_ms").as_string()));
          if (e.contains("model_response") && e.at("model_response").as_object().contains("time_to_first_token_ms")) {
            ttft = std::stod(std::string(e.at("model_response").at("time_to_first_token_ms").as_string()));
          } else if (e.contains("model_response")) {
            ttft = 0;
          }
        }
        if (ttft >= 0) real_through.push_back(request_ms + ttft - t0);
      }
      extra_models.clear();
      if (!real_alone.empty() && !real_through.empty()) {
        std::printf("time to first token with sinew-model (stories260K), median of %d: model alone %.2f ms, "
                    "POST -> first token %.1f ms (+-1 ms: from log timestamps), ratio %.2f, overhead %.1f ms\n",
                    samples, Median(real_alone), Median(real_through), Median(real_through) / Median(real_alone),
                    Median(real_through) - Median(real_alone));
      }
    }
  } else {
    std::printf("sinew-model or %s not found: the in-house model comparison is skipped\n", gguf.c_str());
  }

  // 2. Sessions submitted per second, with wrk.
  {
    auto store = new_store("sync");
    test::HarnessProcess harness(dir.Sub("h2.json"), config(64, store.second));
    if (harness.address.empty()) return 1;
    test::WriteFile(dir.Sub("post.lua"),
                    "wrk.method = \"POST\"\n"
                    "wrk.body = '{\"prompt\": \"benchmark task\"}'\n"
                    "wrk.headers[\"Content-Type\"] = \"application/json\"\n"
                    "wrk.headers[\"Authorization\"] = \"Bearer bench\"\n");
    const std::string cmd = "wrk -t2 -c32 -d" + std::to_string(wrk_seconds) + "s -s " + dir.Sub("post.lua") + " " +
                            harness.url() + "/v1/sessions 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while (p != nullptr && (n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    if (p != nullptr) pclose(p);
    const size_t at = out.find("Requests/sec:");
    const double rps = at == std::string::npos ? 0 : std::atof(out.c_str() + at + 13);
    size_t non2xx = out.find("Non-2xx");
    std::printf("sessions submitted per second (wrk -t2 -c32, %d s): %.0f/s%s\n", wrk_seconds, rps,
                non2xx == std::string::npos ? "" : "  (wrk reported non-2xx answers!)");
    if (at == std::string::npos) std::printf("wrk output:\n%s\n", out.c_str());
  }

  // 3. Concurrent sessions in one harness process.
  {
    auto store = new_store("sync");
    test::HarnessProcess harness(dir.Sub("h3.json"), config(sessions, store.second));
    if (harness.address.empty()) return 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const long base_kb = RssKb(harness.proc->pid());
    std::atomic<long> peak_kb{base_kb};
    std::atomic<bool> sampling{true};
    std::thread sampler([&] {
      while (sampling) {
        peak_kb = std::max(peak_kb.load(), RssKb(harness.proc->pid()));
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
    const auto start = Clock::now();
    std::vector<std::string> ids;
    for (int i = 0; i < sessions; ++i) {
      auto r = Api("POST", harness.url() + "/v1/sessions", "bench", R"({"prompt": "work", "model": "concurrent"})");
      if (r.status == 201) ids.emplace_back(r.json.at("session").at("id").as_string());
    }
    const double submit_s = Ms(Clock::now() - start) / 1000;
    int completed = 0;
    uint64_t events = 0;
    for (const auto& id : ids) {
      if (test::WaitForStatus(harness.url(), "bench", id, "completed,failed", 600) == "completed") ++completed;
    }
    const double wall_s = Ms(Clock::now() - start) / 1000;
    sampling = false;
    sampler.join();
    for (const auto& id : ids) {
      auto r = Api("GET", harness.url() + "/v1/sessions/" + id, "bench");
      if (r.status == 200) events += r.json.at("session").at("next_seq").to_number<uint64_t>() - 1;
    }
    std::printf("%d concurrent sessions in one harness (3 turns, 2 proxy tool calls, 1 s per model call): "
                "submitted in %.1f s, %d completed in %.1f s\n",
                sessions, submit_s, completed, wall_s);
    std::printf("  memory: RSS %.1f MiB idle -> %.1f MiB peak, %.1f KiB per session\n", base_kb / 1024.0,
                peak_kb.load() / 1024.0, static_cast<double>(peak_kb.load() - base_kb) / std::max(1, sessions));
    std::printf("  events: %llu written in %.1f s: %.0f events/s (the ideal, if only the 3 s of model time "
                "per session counted: %.0f/s; ratio %.2f)\n",
                static_cast<unsigned long long>(events), wall_s, events / wall_s,
                static_cast<double>(events) / (submit_s + 3.0), (events / wall_s) / (events / (submit_s + 3.0)));
  }
  return 0;
}

}  // namespace
}  // namespace sinew::harness::bench

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  return sinew::harness::bench::Run(argc, argv);
}
