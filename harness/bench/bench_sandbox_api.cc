// bench_sandbox_api: the sandbox API driven as an orchestrator drives it (docs/sandbox-api.md,
// "Measured"). --cycles create -> execute `echo hi` -> delete cycles at each concurrency of
// --concurrency, once through the harness's REST API (POST /v1/sandboxes, POST
// .../execute, DELETE; libcurl, a connection per request) and once through
// sinew-sandboxd's gRPC directly (Provision, Execute, Destroy), against the same
// sinew-sandboxd (runc) and store, in turn. Prints each phase's p50 and p99, cycles per
// second and failures per path, and the REST/gRPC ratio of a whole cycle, so that the REST
// layer's cost (its tenant checks, audit records and store writes) is a ratio.
//
// Usage: bench_sandbox_api [--cycles 200] [--concurrency 1,8,32] [--warm-pool 0]
// Needs root, runc and the sandbox image (scripts/build-sandbox-image.sh).
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <thread>

#include "sinew/sandbox/provisioner_client.h"
#include "sinew/sandbox/sandbox_client.h"
#include "test_util.h"

namespace sinew::harness::bench {
namespace {

using Clock = std::chrono::steady_clock;
namespace json = boost::json;
constexpr const char* kKey = "bench-key";
// A small sandbox, so that 32 at once fit any host.
constexpr uint64_t kMemory = 128ull << 20, kDisk = 16ull << 20;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

std::string Arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == name) return argv[i + 1];
  }
  return fallback;
}

struct Timings {
  std::vector<double> create, exec, remove, cycle;
  int failures = 0;
  std::string first_failure;
  double seconds = 0;
};

// One cycle's phases; false (with why) when a phase failed.
using CycleFn = std::function<bool(double* create, double* exec, double* remove, std::string* why)>;

Timings Drive(int cycles, int concurrency, const CycleFn& cycle) {
  Timings t;
  std::mutex mu;
  std::atomic<int> next{0};
  const auto start = Clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < concurrency; ++w) {
    workers.emplace_back([&] {
      while (next.fetch_add(1) < cycles) {
        double c = 0, e = 0, r = 0;
        std::string why;
        const auto t0 = Clock::now();
        const bool ok = cycle(&c, &e, &r, &why);
        const double whole = Ms(Clock::now() - t0);
        std::lock_guard<std::mutex> lock(mu);
        if (!ok) {
          if (t.failures++ == 0) t.first_failure = why;
          continue;
        }
        t.create.push_back(c);
        t.exec.push_back(e);
        t.remove.push_back(r);
        t.cycle.push_back(whole);
      }
    });
  }
  for (auto& w : workers) w.join();
  t.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return t;
}

void Print(const char* path, int concurrency, const Timings& t) {
  std::printf("%-5s %4d %6zu %5d  %7.1f %7.1f  %7.1f %7.1f  %7.1f %7.1f  %7.1f %7.1f  %7.1f\n", path, concurrency,
              t.cycle.size(), t.failures, Percentile(t.create, 0.5), Percentile(t.create, 0.99),
              Percentile(t.exec, 0.5), Percentile(t.exec, 0.99), Percentile(t.remove, 0.5),
              Percentile(t.remove, 0.99), Percentile(t.cycle, 0.5), Percentile(t.cycle, 0.99),
              t.seconds > 0 ? static_cast<double>(t.cycle.size()) / t.seconds : 0.0);
  if (t.failures > 0) std::printf("      first failure: %s\n", t.first_failure.c_str());
}

bool RestCycle(const std::string& base, double* create, double* exec, double* remove, std::string* why) {
  auto t0 = Clock::now();
  auto made = test::Api("POST", base + "/v1/sandboxes", kKey,
                        R"({"memory_limit_bytes": )" + std::to_string(kMemory) +
                            R"(, "disk_bytes": )" + std::to_string(kDisk) + R"(, "lifetime_seconds": 600})");
  *create = Ms(Clock::now() - t0);
  if (made.status != 201) {
    *why = "create: HTTP " + std::to_string(made.status) + " " + made.body;
    return false;
  }
  const std::string id(made.json.at("sandbox").at("id").as_string());
  t0 = Clock::now();
  auto ran = test::Api("POST", base + "/v1/sandboxes/" + id + "/execute", kKey,
                       R"({"name": "bash", "input": {"command": "echo hi"}})");
  *exec = Ms(Clock::now() - t0);
  bool ok = ran.status == 200 && ran.body.find("hi") != std::string::npos;
  if (!ok) *why = "execute: HTTP " + std::to_string(ran.status) + " " + ran.body;
  t0 = Clock::now();
  auto gone = test::Api("DELETE", base + "/v1/sandboxes/" + id, kKey);
  *remove = Ms(Clock::now() - t0);
  if (ok && gone.status != 200) {
    *why = "delete: HTTP " + std::to_string(gone.status) + " " + gone.body;
    ok = false;
  }
  return ok;
}

bool GrpcCycle(sandbox::ProvisionerClient& prov, double* create, double* exec, double* remove, std::string* why) {
  v1::Resources resources;
  resources.set_memory_limit_bytes(kMemory);
  resources.set_workspace_bytes(kDisk);
  resources.set_lifetime_seconds(600);
  auto t0 = Clock::now();
  auto info = prov.Provision(resources, "bench");
  *create = Ms(Clock::now() - t0);
  if (!info.ok()) {
    *why = "provision: " + info.status().ToString();
    return false;
  }
  t0 = Clock::now();
  bool ok = false;
  if (auto client = sandbox::SandboxClient::ConnectTo(*info); client.ok()) {
    auto ran = (*client)->Execute("bash", R"({"command": "echo hi"})");
    ok = ran.ok() && ran->output().find("hi") != std::string::npos;
    if (!ok) *why = "execute: " + (ran.ok() ? ran->output() : ran.status().ToString());
  } else {
    *why = "connect: " + client.status().ToString();
  }
  *exec = Ms(Clock::now() - t0);
  t0 = Clock::now();
  auto gone = prov.Destroy(info->id());
  *remove = Ms(Clock::now() - t0);
  if (ok && !gone.ok()) {
    *why = "destroy: " + gone.status().ToString();
    ok = false;
  }
  return ok;
}

int Run(int argc, char** argv) {
  const int cycles = std::stoi(Arg(argc, argv, "--cycles", "200"));
  const std::string warm = Arg(argc, argv, "--warm-pool", "0");
  std::vector<int> levels;
  {
    std::stringstream in(Arg(argc, argv, "--concurrency", "1,8,32"));
    for (std::string item; std::getline(in, item, ',');) levels.push_back(std::stoi(item));
  }
  int most = *std::max_element(levels.begin(), levels.end());
  testing::TempDir dir("sinew-bench-sandbox-api");
  test::StoreProcess store(dir.Sub("db"));
  test::SandboxdProcess sandboxd({"--warm-pool-size", warm, "--max-sandboxes", std::to_string(most * 2 + 8)});
  if (store.address.empty() || sandboxd.address.empty()) {
    std::fprintf(stderr, "bench_sandbox_api: sinew-store or sinew-sandboxd did not start (root, runc, the image)\n");
    return 1;
  }
  const std::string script = test::WriteFile(dir.Sub("script.json"), R"({"responses": [{"text": "done"}]})");
  test::HarnessProcess harness(
      dir.Sub("harness.json"),
      R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store.address + R"("},
          "sandboxd": {"address": ")" + sandboxd.address + R"("},
          "api_keys": {")" + std::string(kKey) + R"(": "bench"},
          "max_connections": 256,
          "models": {"scripted": {"kind": "scripted", "script": ")" + script + R"("}}})");
  if (harness.address.empty()) {
    std::fprintf(stderr, "bench_sandbox_api: sinew-harness did not start\n");
    return 1;
  }
  auto prov = sandbox::ProvisionerClient::Connect(sandboxd.address);
  if (!prov.ok()) {
    std::fprintf(stderr, "bench_sandbox_api: %s\n", prov.status().ToString().c_str());
    return 1;
  }
  const std::string base = harness.url();
  std::printf("bench_sandbox_api: %d create -> exec `echo hi` -> delete cycles per run; runc, warm pool %s; ms\n",
              cycles, warm.c_str());
  std::printf("%-5s %4s %6s %5s  %15s  %15s  %15s  %15s  %7s\n", "path", "conc", "cycles", "fail",
              "create p50 p99", "exec p50 p99", "delete p50 p99", "cycle p50 p99", "cyc/s");
  std::vector<std::string> ratios;
  for (int c : levels) {
    Timings grpc = Drive(cycles, c, [&](double* a, double* b, double* d, std::string* why) {
      return GrpcCycle(**prov, a, b, d, why);
    });
    Print("grpc", c, grpc);
    Timings rest = Drive(cycles, c, [&](double* a, double* b, double* d, std::string* why) {
      return RestCycle(base, a, b, d, why);
    });
    Print("rest", c, rest);
    char line[256];
    std::snprintf(line, sizeof line, "concurrency %2d: REST/gRPC cycle p50 %.2fx, p99 %.2fx, throughput %.2fx", c,
                  Percentile(rest.cycle, 0.5) / std::max(1e-9, Percentile(grpc.cycle, 0.5)),
                  Percentile(rest.cycle, 0.99) / std::max(1e-9, Percentile(grpc.cycle, 0.99)),
                  (rest.seconds > 0 ? rest.cycle.size() / rest.seconds : 0) /
                      std::max(1e-9, grpc.seconds > 0 ? grpc.cycle.size() / grpc.seconds : 0));
    ratios.emplace_back(line);
  }
  for (const auto& r : ratios) std::printf("%s\n", r.c_str());
  std::printf("published, to set beside it: E2B about 150 ms from a template, Daytona under 90 ms (a create)\n");
  return 0;
}

}  // namespace
}  // namespace sinew::harness::bench

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  return sinew::harness::bench::Run(argc, argv);
}
