// The fixture of the sandbox API tests (sandbox_api_test.cc, sandbox_files_test.cc):
// real sinew-store and sinew-sandboxd (runc) per test, harnesses started by the test,
// and helpers for the API's calls, its audit records and the `sinew` CLI.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <memory>
#include <string>
#include <vector>

#include "sinew/sandbox/provisioner_client.h"
#include "test_util.h"

namespace sinew::harness::test {

inline constexpr const char* kKeyA = "sandbox-key-a";
inline constexpr const char* kKeyB = "sandbox-key-b";

class SandboxApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_unique<StoreProcess>(dir_.Sub("db"));
    ASSERT_FALSE(store_->address.empty());
    sandboxd_ = std::make_unique<SandboxdProcess>();
    ASSERT_FALSE(sandboxd_->address.empty())
        << "sinew-sandboxd did not start (root, runc and the image needed)";
    script_ = WriteFile(dir_.Sub("script.json"), R"({"responses": [{"text": "done"}]})");
  }
  std::string Config(const std::string& extra = "") const {
    return R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store_->address + R"("},
      "sandboxd": {"address": ")" +
           sandboxd_->address + R"("},
      "api_keys": {")" +
           std::string(kKeyA) + R"(": "tenant-a", ")" + kKeyB + R"(": "tenant-b"},
      "models": {"scripted": {"kind": "scripted", "script": ")" +
           script_ + R"("}})" + extra + "}";
  }
  std::unique_ptr<HarnessProcess> StartHarness(const std::string& name,
                                               const std::string& extra = "") {
    auto h = std::make_unique<HarnessProcess>(dir_.Sub(name + ".json"), Config(extra));
    EXPECT_FALSE(h->address.empty());
    return h;
  }
  // Creates a sandbox; returns its id ("" on failure, with the reply in the test's log).
  static std::string Create(const std::string& base, const char* key,
                            const std::string& body = "{}") {
    auto r = Api("POST", base + "/v1/sandboxes", key, body);
    EXPECT_EQ(r.status, 201) << r.body;
    if (r.status != 201) return "";
    EXPECT_EQ(r.json.at("sandbox").at("state").as_string(), "ready") << r.body;
    return std::string(r.json.at("sandbox").at("id").as_string());
  }
  static Reply Exec(const std::string& base, const char* key, const std::string& id,
                    const std::string& command, const std::string& call_id = "") {
    boost::json::object body{{"name", "bash"}, {"input", boost::json::object{{"command", command}}}};
    if (!call_id.empty()) body["call_id"] = call_id;
    return Api("POST", base + "/v1/sandboxes/" + id + "/execute", key, boost::json::serialize(body));
  }
  static std::string Output(const Reply& r) {
    if (!r.json.is_object() || !r.json.as_object().contains("result"))
      return "<no result: " + r.body + ">";
    return std::string(r.json.at("result").at("output").as_string());
  }
  // The sandboxes sinew-sandboxd runs now.
  size_t Running() const {
    auto prov = sandbox::ProvisionerClient::Connect(sandboxd_->address);
    if (!prov.ok()) return 9999;
    auto list = (*prov)->List(false);
    return list.ok() ? list->size() : 9999;
  }
  // The tenant's audit records about sandbox `id`: their actions, oldest first.
  static std::vector<std::string> AuditActions(const std::string& base, const char* key,
                                               const std::string& id) {
    std::vector<std::string> actions;
    auto r = Api("GET", base + "/v1/audit?limit=1000", key);
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return actions;
    for (const auto& rec : r.json.at("records").as_array()) {
      if (id.empty() || rec.at("session_id").as_string() == id)
        actions.emplace_back(rec.at("action").as_string());
    }
    return actions;
  }

  testing::TempDir dir_;
  std::unique_ptr<StoreProcess> store_;
  std::unique_ptr<SandboxdProcess> sandboxd_;
  std::string script_;  // the scripted model the config needs (no session uses it)
};

// `sinew sandbox ...` (docs/cli.md) through the same API: its output and exit statuses.
struct CliResult {
  int exit = -1;
  std::string out;
};
inline CliResult Sinew(const std::string& base, const char* key, const std::vector<std::string>& args) {
  std::vector<std::string> argv{testing::BinaryPath("sinew"), "--server", base, "--api-key", key};
  argv.insert(argv.end(), args.begin(), args.end());
  testing::Subprocess proc(argv);
  CliResult r;
  while (auto line = proc.ReadLine(std::chrono::seconds(120))) r.out += *line + "\n";
  r.out += proc.partial();
  const int status = proc.Wait();
  r.exit = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace sinew::harness::test
