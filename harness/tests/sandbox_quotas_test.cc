// The sandbox API's resource quotas (sandbox_memory_bytes, sandbox_cpu_millis,
// snapshot_bytes) and its snapshots routes (GET /v1/sandboxes/snapshots, DELETE
// /v1/sandboxes/snapshots/{id}; docs/sandbox-api.md, "Quotas" and "Snapshots") with real
// sinew-store, sinew-sandboxd (runc) and sinew-harness.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "sandbox_api_fixture.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;

constexpr uint64_t kMiB = 1ull << 20;

std::string Auth(const char* key) { return "Authorization: Bearer " + std::string(key); }

// A 429 quota_exceeded with Retry-After whose message names `quota` and `words`.
void ExpectQuotaRefusal(const Reply& r, const std::string& quota, const std::vector<std::string>& words = {}) {
  EXPECT_EQ(r.status, 429) << r.body;
  if (r.status != 429) return;
  EXPECT_EQ(r.json.at("error").at("code").as_string(), "quota_exceeded") << r.body;
  EXPECT_GE(std::atoi(r.Header("retry-after").c_str()), 1) << r.body;
  const std::string message(r.json.at("error").at("message").as_string());
  EXPECT_NE(message.find(quota), std::string::npos) << message;
  for (const auto& w : words) EXPECT_NE(message.find(w), std::string::npos) << w << " in: " << message;
}

// The tenant's records, ended and deleted ones included.
size_t Records(const std::string& base, const char* key) {
  auto r = Api("GET", base + "/v1/sandboxes?include_ended=true&limit=1000", key);
  EXPECT_EQ(r.status, 200) << r.body;
  return r.status == 200 ? r.json.at("sandboxes").as_array().size() : 9999;
}

// The tenant's snapshot ids, newest first.
std::vector<std::string> SnapshotIds(const std::string& base, const char* key) {
  std::vector<std::string> ids;
  auto r = Api("GET", base + "/v1/sandboxes/snapshots", key);
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return ids;
  for (const auto& s : r.json.at("snapshots").as_array()) ids.emplace_back(s.at("id").as_string());
  return ids;
}

TEST_F(SandboxApiTest, OverItsMemoryQuotaATenantGets429AndNothingIsCreatedOrResumed) {
  auto h = StartHarness("h", R"(, "tenants": {"tenant-a": {"sandbox_memory_bytes": )" +
                                 std::to_string(512 * kMiB) + "}}");
  const std::string base = h->url();
  const std::string quarter = std::to_string(256 * kMiB), more = std::to_string(300 * kMiB);
  const std::string first = Create(base, kKeyA, R"({"memory_bytes": )" + quarter +
                                                    R"(, "memory_limit_bytes": )" + quarter + "}");
  ASSERT_FALSE(first.empty());
  const size_t running = Running();
  const std::string bigger = R"({"memory_bytes": )" + more + R"(, "memory_limit_bytes": )" + more + "}";

  // 256 MiB held + 300 MiB asked > 512 MiB: refused before anything is provisioned.
  ExpectQuotaRefusal(Api("POST", base + "/v1/sandboxes", kKeyA, bigger), "sandbox_memory_bytes",
                     {quarter, more});
  // A fork of two asks for twice the source's memory.
  ExpectQuotaRefusal(Api("POST", base + "/v1/sandboxes/" + first + "/fork", kKeyA, R"({"n": 2})"),
                     "sandbox_memory_bytes", {quarter, std::to_string(512 * kMiB)});
  EXPECT_EQ(Running(), running);
  EXPECT_EQ(Records(base, kKeyA), 1u);

  // A paused sandbox holds no memory: the bigger one fits then, and the paused one cannot
  // come back while it runs.
  ASSERT_EQ(Api("POST", base + "/v1/sandboxes/" + first + "/pause", kKeyA).status, 200);
  const std::string second = Create(base, kKeyA, bigger);
  ASSERT_FALSE(second.empty());
  ExpectQuotaRefusal(Api("POST", base + "/v1/sandboxes/" + first + "/resume", kKeyA), "sandbox_memory_bytes",
                     {more, quarter});
  EXPECT_EQ(Api("GET", base + "/v1/sandboxes/" + first, kKeyA).json.at("sandbox").at("state").as_string(),
            "paused");
  EXPECT_EQ(Exec(base, kKeyA, first, "true").status, 409) << "still paused";
  // Another tenant is not limited by tenant-a's quota.
  EXPECT_FALSE(Create(base, kKeyB, bigger).empty());
  // Deleting the second makes room for the first again.
  ASSERT_EQ(Call("DELETE", base + "/v1/sandboxes/" + second, "", {Auth(kKeyA)}).status, 200);
  EXPECT_EQ(Api("POST", base + "/v1/sandboxes/" + first + "/resume", kKeyA).status, 200);

  // The refusals left no trace in the audit log.
  EXPECT_EQ(AuditActions(base, kKeyA, first),
            (std::vector<std::string>{"sandbox_create", "sandbox_pause", "sandbox_resume"}));
  EXPECT_EQ(AuditActions(base, kKeyA, second), (std::vector<std::string>{"sandbox_create", "sandbox_delete"}));
  EXPECT_EQ(Records(base, kKeyA), 2u);
}

TEST_F(SandboxApiTest, OverItsCpuQuotaWithTheHostsDefaultsACreateIs429AndLeavesNothing) {
  auto h = StartHarness("h", R"(, "tenants": {"tenant-a": {"sandbox_cpu_millis": 1500}})");
  const std::string base = h->url();
  // The host fills in its default CPU (1000 millis), which counts.
  const std::string first = Create(base, kKeyA);
  ASSERT_FALSE(first.empty());
  auto got = Api("GET", base + "/v1/sandboxes/" + first, kKeyA);
  const int64_t each = got.json.at("sandbox").at("resources").at("cpu_millis").to_number<int64_t>();
  ASSERT_GT(each, 750) << "the test needs a host default above half the quota: " << got.body;
  const size_t running = Running();
  // The second asks for nothing named; the host's default puts it over: it goes before it
  // is recorded.
  ExpectQuotaRefusal(Api("POST", base + "/v1/sandboxes", kKeyA, "{}"), "sandbox_cpu_millis",
                     {std::to_string(each)});
  // Named, it is refused before it is provisioned.
  ExpectQuotaRefusal(Api("POST", base + "/v1/sandboxes", kKeyA, R"({"cpu_millis": 1000})"), "sandbox_cpu_millis");
  EXPECT_EQ(Running(), running);
  EXPECT_EQ(Records(base, kKeyA), 1u);
  EXPECT_EQ(AuditActions(base, kKeyA, ""), std::vector<std::string>{"sandbox_create"});
  // What fits is let through.
  EXPECT_FALSE(Create(base, kKeyA, R"({"cpu_millis": 500})").empty());
}

TEST_F(SandboxApiTest, OnceItsSnapshotsReachTheQuotaSnapshotForkAndPauseAre429) {
  auto h = StartHarness("h", R"(, "tenants": {"tenant-a": {"snapshot_bytes": 1}})");
  const std::string base = h->url();
  const std::string id = Create(base, kKeyA);
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(Exec(base, kKeyA, id, "head -c 100000 /dev/urandom > /workspace/data").status, 200);
  // Under the quota (nothing held yet): taken.
  auto first = Api("POST", base + "/v1/sandboxes/" + id + "/snapshot", kKeyA);
  ASSERT_EQ(first.status, 201) << first.body;
  auto listed = Api("GET", base + "/v1/sandboxes/snapshots", kKeyA);
  ASSERT_EQ(listed.status, 200) << listed.body;
  ASSERT_GE(listed.json.at("owner_bytes").to_number<int64_t>(), 1) << listed.body;
  EXPECT_EQ(listed.json.at("quota_bytes").to_number<int64_t>(), 1);

  const size_t running = Running();
  ExpectQuotaRefusal(Api("POST", base + "/v1/sandboxes/" + id + "/snapshot", kKeyA), "snapshot_bytes");
  ExpectQuotaRefusal(Api("POST", base + "/v1/sandboxes/" + id + "/fork", kKeyA), "snapshot_bytes");
  ExpectQuotaRefusal(Api("POST", base + "/v1/sandboxes/" + id + "/pause", kKeyA), "snapshot_bytes");
  EXPECT_EQ(SnapshotIds(base, kKeyA).size(), 1u) << "no snapshot was taken";
  EXPECT_EQ(Api("GET", base + "/v1/sandboxes/" + id, kKeyA).json.at("sandbox").at("state").as_string(), "ready");
  EXPECT_EQ(Running(), running);
  EXPECT_EQ(Records(base, kKeyA), 1u);
  EXPECT_EQ(AuditActions(base, kKeyA, id), (std::vector<std::string>{"sandbox_create", "sandbox_execute",
                                                                     "sandbox_snapshot"}));
  // Deleting it makes room.
  const std::string snap(first.json.at("snapshot").at("id").as_string());
  ASSERT_EQ(Call("DELETE", base + "/v1/sandboxes/snapshots/" + snap, "", {Auth(kKeyA)}).status, 200);
  EXPECT_EQ(Api("POST", base + "/v1/sandboxes/" + id + "/snapshot", kKeyA).status, 201);
}

TEST_F(SandboxApiTest, SnapshotsAreListedAndDeletedByTheirTenantOnly) {
  auto h = StartHarness("h");
  const std::string base = h->url();
  const std::string id = Create(base, kKeyA);
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(Exec(base, kKeyA, id, "echo kept > /workspace/state").status, 200);
  auto taken = Api("POST", base + "/v1/sandboxes/" + id + "/snapshot", kKeyA);
  ASSERT_EQ(taken.status, 201) << taken.body;
  const std::string snap(taken.json.at("snapshot").at("id").as_string());
  auto forked = Api("POST", base + "/v1/sandboxes/" + id + "/fork", kKeyA);
  ASSERT_EQ(forked.status, 201) << forked.body;
  const std::string fork_snap(forked.json.at("snapshot").at("id").as_string());

  auto listed = Api("GET", base + "/v1/sandboxes/snapshots", kKeyA);
  ASSERT_EQ(listed.status, 200) << listed.body;
  const auto& snaps = listed.json.at("snapshots").as_array();
  ASSERT_EQ(snaps.size(), 2u) << listed.body;
  EXPECT_EQ(snaps.at(0).at("id").as_string(), fork_snap) << "newest first";
  EXPECT_EQ(snaps.at(1).at("id").as_string(), snap);
  for (const auto& s : snaps) {
    EXPECT_EQ(s.at("source_sandbox").as_string(), id) << "the API's id, not sinew-sandboxd's";
    EXPECT_GT(s.at("data_bytes").to_number<int64_t>(), 0);
    EXPECT_GE(s.at("logical_bytes").to_number<int64_t>(), s.at("data_bytes").to_number<int64_t>());
    EXPECT_FALSE(s.at("host").as_string().empty());
  }
  EXPECT_GT(listed.json.at("owner_bytes").to_number<int64_t>(), 0);
  EXPECT_EQ(listed.json.at("quota_bytes").to_number<int64_t>(), 0);

  // Another tenant sees none and deletes none.
  EXPECT_TRUE(SnapshotIds(base, kKeyB).empty());
  auto theirs = Call("DELETE", base + "/v1/sandboxes/snapshots/" + snap, "", {Auth(kKeyB)});
  EXPECT_EQ(theirs.status, 404) << theirs.body;
  EXPECT_EQ(SnapshotIds(base, kKeyA).size(), 2u);

  auto deleted = Call("DELETE", base + "/v1/sandboxes/snapshots/" + snap, "", {Auth(kKeyA)});
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(deleted.json.at("snapshot").at("id").as_string(), snap);
  EXPECT_EQ(SnapshotIds(base, kKeyA), std::vector<std::string>{fork_snap});
  auto again = Call("DELETE", base + "/v1/sandboxes/snapshots/" + snap, "", {Auth(kKeyA)});
  EXPECT_EQ(again.status, 404) << again.body;
  auto gone = Api("POST", base + "/v1/sandboxes", kKeyA, R"({"from_snapshot": ")" + snap + R"("})");
  EXPECT_EQ(gone.status, 400) << "a deleted snapshot restores nothing: " << gone.body;
  // The fork's child keeps its files.
  const std::string child(forked.json.at("sandboxes").at(0).at("id").as_string());
  EXPECT_EQ(Output(Exec(base, kKeyA, child, "cat /workspace/state")), "kept\n");

  // The snapshot a paused sandbox is kept in is listed and cannot be deleted here.
  ASSERT_EQ(Api("POST", base + "/v1/sandboxes/" + id + "/pause", kKeyA).status, 200);
  std::string pause_snap;
  for (const auto& s : SnapshotIds(base, kKeyA)) {
    if (s != fork_snap) pause_snap = s;
  }
  ASSERT_FALSE(pause_snap.empty());
  auto held = Call("DELETE", base + "/v1/sandboxes/snapshots/" + pause_snap, "", {Auth(kKeyA)});
  EXPECT_EQ(held.status, 409) << held.body;
  ASSERT_EQ(Api("POST", base + "/v1/sandboxes/" + id + "/resume", kKeyA).status, 200);
  EXPECT_EQ(Output(Exec(base, kKeyA, id, "cat /workspace/state")), "kept\n");

  // Bad input: 404 or 405, nothing deleted.
  struct Case {
    std::string what, method, path;
    long status;
  };
  const std::vector<Case> cases = {
      {"a malformed id", "DELETE", "/v1/sandboxes/snapshots/snap-xyz", 404},
      {"a path in the id", "DELETE", "/v1/sandboxes/snapshots/..%2f" + fork_snap, 404},
      {"an unknown id", "DELETE", "/v1/sandboxes/snapshots/snap-" + std::string(32, 'a'), 404},
      {"POST on the list", "POST", "/v1/sandboxes/snapshots", 405},
      {"GET on one", "GET", "/v1/sandboxes/snapshots/" + fork_snap, 405},
      {"below one", "DELETE", "/v1/sandboxes/snapshots/" + fork_snap + "/x", 404},
  };
  for (const auto& c : cases) {
    auto r = Call(c.method, base + c.path, "{}", {Auth(kKeyA), "Content-Type: application/json"});
    EXPECT_EQ(r.status, c.status) << c.what << ": " << r.body;
    ASSERT_TRUE(r.json.is_object()) << c.what << ": " << r.body;
    EXPECT_FALSE(r.json.at("error").at("message").as_string().empty()) << c.what;
  }
  EXPECT_EQ(SnapshotIds(base, kKeyA), std::vector<std::string>{fork_snap});

  auto actions = AuditActions(base, kKeyA, id);
  EXPECT_EQ(std::count(actions.begin(), actions.end(), "sandbox_snapshot_delete"), 1) << "one deletion";
  EXPECT_TRUE(AuditActions(base, kKeyB, "").empty());

  // The CLI: list, then delete.
  CliResult cli_listed = Sinew(base, kKeyA, {"sandbox", "snapshots"});
  EXPECT_EQ(cli_listed.exit, 0) << cli_listed.out;
  EXPECT_EQ(cli_listed.out.rfind(fork_snap + "  " + id, 0), 0u) << cli_listed.out;
  EXPECT_NE(cli_listed.out.find("total "), std::string::npos) << cli_listed.out;
  CliResult cli_theirs = Sinew(base, kKeyB, {"sandbox", "rmsnap", fork_snap});
  EXPECT_EQ(cli_theirs.exit, 2) << "another tenant's is not found: " << cli_theirs.out;
  CliResult cli_removed = Sinew(base, kKeyA, {"sandbox", "rmsnap", fork_snap});
  EXPECT_EQ(cli_removed.exit, 0) << cli_removed.out;
  EXPECT_EQ(cli_removed.out, fork_snap + "  deleted\n");
  EXPECT_TRUE(SnapshotIds(base, kKeyA).empty());
}

}  // namespace
}  // namespace sinew::harness::test
