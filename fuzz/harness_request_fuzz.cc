// Harness request bodies (harness/src/api_handler.cc, api_sessions.cc, api_fork.cc):
// ApiHandler::Handle, the REST API's routing and body parsing, in process over a real
// embedded session store (RocksDB in a temporary directory) and a scripted model.
// Input: "METHOD TARGET\n" then the body; "{id}" in the target stands for a session
// created at start-up (so messages, cancel, fork and events reach a real session).
// The event stream is left out (it blocks until the session ends). Sessions are not
// driven (the SessionControl here only records wakes), so bodies reach the store as
// the API wrote them.
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include <boost/json.hpp>

#include "api_handler.h"
#include "fuzz_util.h"
#include "harness_deps.h"
#include "sinew/metrics.h"
#include "sinew/harness/config.h"
#include "sinew/harness/model_client.h"
#include "sinew/harness/vault.h"
#include "sinew/session_store/session_store.h"
#include "sandbox_backend.h"

namespace {

using namespace sinew;
using namespace sinew::harness;

class RecordingControl final : public SessionControl {
 public:
  void Wake(const std::string&) override { ++wakes; }
  bool DeliverMessage(const std::string&, const std::string&) override { return false; }
  bool DeliverCancel(const std::string&, const std::string&, const v1::Event&) override { return false; }
  bool DeliverClose(const std::string&, const v1::Event&) override { return false; }
  Status Ready() override { return Status::Ok(); }
  std::string SessionsByStatusMetrics() override { return ""; }
  uint64_t wakes = 0;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "harness_request_fuzz setup: %s\n", what.c_str());
  std::abort();
}

struct World {
  std::string dir;
  HarnessConfig config;
  std::unique_ptr<store::SessionStore> store;
  std::unique_ptr<Vault> vault;
  std::map<std::string, std::unique_ptr<ModelClient>> models;
  std::unique_ptr<ProxyTools> proxy;
  std::unique_ptr<SandboxBackend> sandboxes;
  Metrics metrics{std::vector<double>{0.1, 1}};
  std::unique_ptr<ApiKeys> api_keys;
  std::unique_ptr<TenantQuotas> quotas;
  std::atomic<bool> stopping{false};
  HarnessDeps deps;
  RecordingControl control;
  std::unique_ptr<ApiHandler> handler;
  std::string session_id;

  World() {
    dir = (std::filesystem::temp_directory_path() / ("sinew-fuzz-harness-" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/script.json") << R"({"responses": [{"text": "done"}]})";
    auto parsed = ParseConfig(R"({"store": {"dir": ")" + dir + R"(/db", "durability": "async"},
        "api_keys": {"fuzz-key": "tenant-a"}, "default_model": "scripted",
        "models": {"scripted": {"kind": "scripted", "script": ")" + dir + R"(/script.json"}}})");
    if (!parsed.ok()) Die(parsed.status().message());
    config = std::move(parsed).value();
    store::StoreOptions options;
    options.durability = store::Durability::kAsync;
    auto opened = store::OpenSessionStore(config.store_dir, options);
    if (!opened.ok()) Die(opened.status().message());
    store = std::move(opened).value();
    vault = Vault::Create(config.secrets);
    for (const auto& [name, m] : config.models) {
      auto client = MakeModelClient(m, "");
      if (!client.ok()) Die(client.status().message());
      models[name] = std::move(client).value();
    }
    proxy = std::make_unique<ProxyTools>(config.http_allow, vault.get());
    sandboxes = SandboxBackend::Create("");
    deps.config = &config;
    deps.store = store.get();
    deps.vault = vault.get();
    deps.models = &models;
    deps.proxy = proxy.get();
    deps.sandboxes = sandboxes.get();
    deps.metrics = &metrics;
    auto keys = ApiKeys::Create(config);
    if (!keys.ok()) Die(keys.status().message());
    api_keys = std::move(keys).value();
    deps.api_keys = api_keys.get();
    quotas = std::make_unique<TenantQuotas>(config.tenants);
    deps.quotas = quotas.get();
    deps.owner = "http://127.0.0.1:1#fuzz";
    deps.stopping = &stopping;
    handler = std::make_unique<ApiHandler>(&deps, &control);
    NewSession();
  }
  // The session "{id}" stands for. Inputs append to it, so it is replaced now and then:
  // otherwise each input's cost grows with the run (an export after a million inputs
  // read a session of some 100,000 events and hit libFuzzer's timeout).
  void NewSession() {
    ApiResponse created = Send("POST", "/v1/sessions", R"({"prompt": "hello", "title": "fuzz"})");
    if (created.status != 201) Die("POST /v1/sessions: " + std::to_string(created.status) + " " + created.body);
    session_id = std::string(boost::json::parse(created.body).at("session").at("id").as_string());
  }
  ~World() {
    handler.reset();
    store.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  ApiResponse Send(std::string method, std::string target, std::string body) {
    ApiRequest r;
    r.method = std::move(method);
    r.target = std::move(target);
    r.authorization = "Bearer fuzz-key";
    r.content_type = r.target.find("import") != std::string::npos ? "application/x-ndjson" : "application/json";
    r.body = std::move(body);
    if (ApiHandler::IsStream(r)) return {};
    return handler->Handle(r);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = [] {
    static World w;
    return &w;
  }();
  static uint64_t inputs = 0;
  if (++inputs % 2000 == 0) world->NewSession();
  const auto [head, body] = sinew::fuzz::SplitAt(sinew::fuzz::Bytes(data, size), "\n");
  const auto [method, target_in] = sinew::fuzz::SplitAt(head, " ");
  std::string target(target_in);
  for (size_t at; (at = target.find("{id}")) != std::string::npos;) target.replace(at, 4, world->session_id);
  ApiResponse r = world->Send(std::string(method), target, std::string(body));
  if (r.status >= 500 && r.status != 503) {
    // Bad input is a 4xx; a 5xx means the handler failed on it.
    std::fprintf(stderr, "%d %s\n", r.status, r.body.c_str());
    sinew::fuzz::Violated("the harness answered bad input with a 5xx");
  }
  if (r.status >= 400) {
    boost::system::error_code ec;
    auto v = boost::json::parse(r.body, ec);
    if (ec || !v.is_object() || !v.as_object().contains("error")) sinew::fuzz::Violated("an error without a JSON error body");
  }
  return 0;
}
