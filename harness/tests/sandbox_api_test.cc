// The sandbox API (/v1/sandboxes; docs/sandbox-api.md) end to end with real processes:
// sinew-store, sinew-sandboxd with runc sandboxes and sinew-harness (two of them where a
// case needs a second replica), over loopback HTTP.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <atomic>
#include <set>
#include <thread>

#include "sandbox_api_fixture.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;

TEST_F(SandboxApiTest, ASandboxIsCreatedRunsCommandsAndIsDeletedAndEveryStepIsAudited) {
  auto h = StartHarness("h");
  const std::string base = h->url();
  const std::string id =
      Create(base, kKeyA, R"({"image": "default", "runtime": "runc", "cpu_millis": 500,
      "memory_limit_bytes": 268435456, "lifetime_seconds": 600})");
  ASSERT_FALSE(id.empty());
  auto got = Api("GET", base + "/v1/sandboxes/" + id, kKeyA);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.json.at("sandbox").at("resources").at("cpu_millis").as_int64(), 500);
  EXPECT_EQ(got.json.at("sandbox").at("resources").at("memory_limit_bytes").as_int64(), 268435456);
  EXPECT_EQ(got.json.at("sandbox").at("live").at("state").as_string(), "ready");

  auto ran = Exec(base, kKeyA, id, "echo hello > greeting && cat greeting");
  ASSERT_EQ(ran.status, 200) << ran.body;
  EXPECT_EQ(Output(ran), "hello\n");
  EXPECT_EQ(ran.json.at("result").at("exit_code").as_int64(), 0);
  auto read = Api("POST", base + "/v1/sandboxes/" + id + "/execute", kKeyA,
                  R"({"name": "read_file", "input": {"path": "greeting"}})");
  ASSERT_EQ(read.status, 200) << read.body;
  EXPECT_NE(Output(read).find("hello"), std::string::npos) << read.body;
  auto failed = Exec(base, kKeyA, id, "exit 3");
  ASSERT_EQ(failed.status, 200) << failed.body;
  EXPECT_EQ(failed.json.at("result").at("exit_code").as_int64(), 3);

  auto listed = Api("GET", base + "/v1/sandboxes", kKeyA);
  ASSERT_EQ(listed.status, 200) << listed.body;
  ASSERT_EQ(listed.json.at("sandboxes").as_array().size(), 1u);
  EXPECT_EQ(listed.json.at("sandboxes").at(0).at("id").as_string(), id);
  EXPECT_EQ(Running(), 1u);

  auto deleted = Call("DELETE", base + "/v1/sandboxes/" + id, "",
                      {"Authorization: Bearer " + std::string(kKeyA)});
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(deleted.json.at("sandbox").at("state").as_string(), "deleted");
  EXPECT_EQ(Running(), 0u);
  // Gone from the list (still readable by id, as deleted), and no command runs in it.
  EXPECT_TRUE(Api("GET", base + "/v1/sandboxes", kKeyA).json.at("sandboxes").as_array().empty());
  EXPECT_EQ(Api("GET", base + "/v1/sandboxes?include_ended=true", kKeyA)
                .json.at("sandboxes")
                .as_array()
                .size(),
            1u);
  EXPECT_EQ(
      Api("GET", base + "/v1/sandboxes/" + id, kKeyA).json.at("sandbox").at("state").as_string(),
      "deleted");
  auto late = Exec(base, kKeyA, id, "echo late");
  EXPECT_EQ(late.status, 409) << late.body;

  EXPECT_EQ(AuditActions(base, kKeyA, id),
            (std::vector<std::string>{"sandbox_create", "sandbox_execute", "sandbox_execute",
                                      "sandbox_execute", "sandbox_delete"}))
      << "the refused call after the deletion ran nothing and left no record";
  // The executed command is in its record.
  auto audit = Api("GET", base + "/v1/audit?limit=1000", kKeyA);
  EXPECT_NE(audit.body.find("echo hello > greeting"), std::string::npos) << audit.body;
  // A sandbox record is not a session of the tenant.
  EXPECT_TRUE(Api("GET", base + "/v1/sessions", kKeyA).json.at("sessions").as_array().empty());
  EXPECT_EQ(Api("GET", base + "/v1/sessions/" + id, kKeyA).status, 404);
}

TEST_F(SandboxApiTest, ACallIdRunsOnceAndARepeatGetsTheFirstResult) {
  auto h = StartHarness("h");
  const std::string base = h->url();
  const std::string id = Create(base, kKeyA);
  ASSERT_FALSE(id.empty());
  auto first = Exec(base, kKeyA, id, "echo run >> runs; wc -l < runs", "call-1");
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(Output(first), "1\n");
  EXPECT_FALSE(first.json.at("result").at("replayed").as_bool());
  auto again = Exec(base, kKeyA, id, "echo run >> runs; wc -l < runs", "call-1");
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(Output(again), "1\n");
  EXPECT_TRUE(again.json.at("result").at("replayed").as_bool());
  EXPECT_EQ(Output(Exec(base, kKeyA, id, "wc -l < runs")), "1\n") << "the command ran once";
  // The same id for another call is refused and runs nothing.
  auto other = Exec(base, kKeyA, id, "echo other >> runs", "call-1");
  EXPECT_EQ(other.status, 409) << other.body;
  EXPECT_EQ(Output(Exec(base, kKeyA, id, "cat runs")), "run\n");
}

TEST_F(SandboxApiTest, AskedForEventsExecuteStreamsTheOutputWhileTheCommandRuns) {
  auto h = StartHarness("h");
  const std::string base = h->url();
  const std::string id = Create(base, kKeyA);
  ASSERT_FALSE(id.empty());
  const std::string url = base + "/v1/sandboxes/" + id + "/execute";
  // The command waits for a file that the test makes only once it has seen the first line,
  // so that line must have come while the command still ran.
  std::atomic<bool> saw_first{false};
  long status = 0;
  std::vector<SseEvent> events;
  std::thread reader([&] {
    events = PostForEvents(
        url, kKeyA,
        R"({"name": "bash", "call_id": "streamed-1", "input": {"command": "echo first; until [ -e /workspace/go ]; do sleep 0.05; done; printf 'café second' >&2"}})",
        [&](const SseEvent& e) {
          if (e.type == "output" && e.data.find("first") != std::string::npos) saw_first = true;
        },
        &status);
  });
  for (int i = 0; i < 1200 && !saw_first; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(saw_first) << "no output event came while the command ran";
  EXPECT_EQ(Exec(base, kKeyA, id, "touch /workspace/go").status, 200);
  reader.join();
  EXPECT_EQ(status, 200);
  ASSERT_GE(events.size(), 3u);
  std::string out, err;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    ASSERT_EQ(events[i].type, "output") << events[i].data;
    auto e = boost::json::parse(events[i].data).as_object();
    (e.at("stream").as_string() == "stdout" ? out : err) += std::string(e.at("text").as_string());
  }
  EXPECT_EQ(out, "first\n");
  EXPECT_EQ(err, "café second");
  ASSERT_EQ(events.back().type, "result") << events.back().data;
  auto result = boost::json::parse(events.back().data).at("result").as_object();
  EXPECT_EQ(result.at("exit_code").to_number<int64_t>(), 0);
  EXPECT_NE(std::string(result.at("output").as_string()).find("first"), std::string::npos);

  // The same call id again: its first run's result, not a second run.
  auto again = PostForEvents(url, kKeyA,
                             R"({"name": "bash", "call_id": "streamed-1", "input": {"command": "echo first; until [ -e /workspace/go ]; do sleep 0.05; done; printf 'café second' >&2"}})",
                             {}, &status);
  EXPECT_EQ(status, 200);
  ASSERT_FALSE(again.empty());
  ASSERT_EQ(again.back().type, "result") << again.back().data;
  EXPECT_TRUE(boost::json::parse(again.back().data).at("result").at("replayed").as_bool());
  // The same call id with another call: the answer's last event is the 409's error.
  auto conflict = PostForEvents(url, kKeyA, R"({"name": "bash", "call_id": "streamed-1", "input": {"command": "echo other"}})",
                                {}, &status);
  EXPECT_EQ(status, 200);
  ASSERT_FALSE(conflict.empty());
  EXPECT_EQ(conflict.back().type, "error");
  EXPECT_EQ(boost::json::parse(conflict.back().data).at("error").at("code").as_string(), "conflict");
  // Refused before anything runs: a plain JSON 4xx, no stream.
  auto bad = PostForEvents(url, kKeyA, R"({"name": "nope"})", {}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_TRUE(bad.empty());
  auto theirs = PostForEvents(url, kKeyB, R"({"name": "bash", "input": {"command": "echo x"}})", {}, &status);
  EXPECT_EQ(status, 404);
  EXPECT_TRUE(theirs.empty());
}

TEST_F(SandboxApiTest, AnotherTenantsSandboxAnswers404AndStaysAsItWas) {
  auto h = StartHarness("h");
  const std::string base = h->url();
  const std::string id = Create(base, kKeyA);
  ASSERT_FALSE(id.empty());
  const std::string b_auth = "Authorization: Bearer " + std::string(kKeyB);
  const std::string s = base + "/v1/sandboxes/" + id;
  EXPECT_EQ(Api("GET", s, kKeyB).status, 404);
  EXPECT_EQ(Call("DELETE", s, "", {b_auth}).status, 404);
  EXPECT_EQ(Exec(base, kKeyB, id, "touch /workspace/intruder").status, 404);
  for (const char* verb : {"/snapshot", "/fork", "/pause", "/resume"}) {
    auto r = Api("POST", s + verb, kKeyB);
    EXPECT_EQ(r.status, 404) << verb << ": " << r.body;
    EXPECT_EQ(r.json.at("error").at("code").as_string(), "not_found");
  }
  EXPECT_TRUE(Api("GET", base + "/v1/sandboxes?include_ended=true", kKeyB)
                  .json.at("sandboxes")
                  .as_array()
                  .empty());
  // Unchanged for its owner: running, nothing written in it, nothing in b's audit log.
  auto mine = Api("GET", s, kKeyA);
  EXPECT_EQ(mine.json.at("sandbox").at("state").as_string(), "ready") << mine.body;
  EXPECT_EQ(Output(Exec(base, kKeyA, id, "ls /workspace | wc -l")), "0\n");
  EXPECT_TRUE(AuditActions(base, kKeyB, "").empty());
  EXPECT_EQ(Running(), 1u);
}

TEST_F(SandboxApiTest, OverItsQuotasATenantGets429WithRetryAfterAndNothingIsCreated) {
  auto h = StartHarness("h", R"(, "tenants": {"tenant-a": {"max_api_sandboxes": 1},
      "tenant-b": {"sandbox_creations_per_minute": 1}})");
  const std::string base = h->url();
  const std::string a = Create(base, kKeyA);
  ASSERT_FALSE(a.empty());
  auto over = Api("POST", base + "/v1/sandboxes", kKeyA, "{}");
  EXPECT_EQ(over.status, 429) << over.body;
  EXPECT_EQ(over.json.at("error").at("code").as_string(), "quota_exceeded");
  EXPECT_FALSE(over.Header("retry-after").empty());
  auto fork = Api("POST", base + "/v1/sandboxes/" + a + "/fork", kKeyA, R"({"n": 1})");
  EXPECT_EQ(fork.status, 429) << fork.body;
  EXPECT_EQ(Running(), 1u);
  // Deleting one makes room.
  ASSERT_EQ(Call("DELETE", base + "/v1/sandboxes/" + a, "",
                 {"Authorization: Bearer " + std::string(kKeyA)})
                .status,
            200);
  const std::string again = Create(base, kKeyA);
  EXPECT_FALSE(again.empty());

  // Tenant b: one creation a minute, deleted or not.
  const std::string b = Create(base, kKeyB);
  ASSERT_FALSE(b.empty());
  ASSERT_EQ(Call("DELETE", base + "/v1/sandboxes/" + b, "",
                 {"Authorization: Bearer " + std::string(kKeyB)})
                .status,
            200);
  auto fast = Api("POST", base + "/v1/sandboxes", kKeyB, "{}");
  EXPECT_EQ(fast.status, 429) << fast.body;
  EXPECT_EQ(fast.json.at("error").at("code").as_string(), "rate_limited");
  const int retry = std::atoi(fast.Header("retry-after").c_str());
  EXPECT_GE(retry, 1) << fast.body;
  EXPECT_LE(retry, 60) << fast.body;
  EXPECT_EQ(Api("GET", base + "/v1/sandboxes", kKeyB).json.at("sandboxes").as_array().size(), 0u);
  EXPECT_EQ(Running(), 1u);
}

TEST_F(SandboxApiTest, BadInputIsAClear4xxAndCreatesOrChangesNothing) {
  auto h = StartHarness("h");
  const std::string base = h->url();
  const std::string id = Create(base, kKeyA);
  ASSERT_FALSE(id.empty());
  struct Case {
    std::string what, method, path, body;
    long status;
  };
  const std::string s = "/v1/sandboxes/" + id;
  const std::vector<Case> cases = {
      {"an image that is not built", "POST", "/v1/sandboxes", R"({"image": "no-such-image"})", 400},
      {"an image name with a slash", "POST", "/v1/sandboxes", R"({"image": "../etc"})", 400},
      {"cpu below the range", "POST", "/v1/sandboxes", R"({"cpu_millis": 1})", 400},
      {"memory above the range", "POST", "/v1/sandboxes",
       R"({"memory_limit_bytes": 1125899906842624000})", 400},
      {"a lifetime past a week", "POST", "/v1/sandboxes", R"({"lifetime_seconds": 700000})", 400},
      {"a negative pids", "POST", "/v1/sandboxes", R"({"pids": -1})", 400},
      {"a runtime that does not exist", "POST", "/v1/sandboxes", R"({"runtime": "docker"})", 400},
      {"a network", "POST", "/v1/sandboxes", R"({"network": "host"})", 400},
      {"an unknown field", "POST", "/v1/sandboxes", R"({"colour": "red"})", 400},
      {"not JSON", "POST", "/v1/sandboxes", "{oops", 400},
      {"a JSON array", "POST", "/v1/sandboxes", "[]", 400},
      {"a snapshot id that is not one", "POST", "/v1/sandboxes", R"({"from_snapshot": "../x"})",
       400},
      {"a snapshot nobody took", "POST", "/v1/sandboxes",
       R"({"from_snapshot": "snap-0123456789abcdef0123456789abcdef"})", 400},
      {"a tool that is not one", "POST", s + "/execute", R"({"name": "rm_rf", "input": {}})", 400},
      {"no tool name", "POST", s + "/execute", R"({"input": {"command": "ls"}})", 400},
      {"input that is not an object", "POST", s + "/execute", R"({"name": "bash", "input": "ls"})",
       400},
      {"a call id with a space", "POST", s + "/execute",
       R"({"name": "bash", "input": {}, "call_id": "a b"})", 400},
      {"execute, not JSON", "POST", s + "/execute", "{", 400},
      {"fork of 17", "POST", s + "/fork", R"({"n": 17})", 400},
      {"fork of 0", "POST", s + "/fork", R"({"n": 0})", 400},
      {"an unknown id", "GET", "/v1/sandboxes/" + std::string(32, 'f'), "", 404},
      {"a malformed id", "GET", "/v1/sandboxes/..%2f..", "", 404},
      {"execute in an unknown id", "POST", "/v1/sandboxes/" + std::string(32, 'f') + "/execute",
       R"({"name": "bash", "input": {"command": "ls"}})", 404},
      {"delete of an unknown id", "DELETE", "/v1/sandboxes/" + std::string(32, 'e'), "", 404},
      {"an unknown verb", "POST", s + "/explode", "{}", 404},
      {"PUT on a sandbox", "PUT", s, "{}", 405},
      {"GET on execute", "GET", s + "/execute", "", 405},
      {"a limit of 0", "GET", "/v1/sandboxes?limit=0", "", 400},
      {"a page token not issued", "GET", "/v1/sandboxes?page_token=zz", "", 400},
  };
  for (const auto& c : cases) {
    auto r =
        Call(c.method, base + c.path, c.body,
             {"Authorization: Bearer " + std::string(kKeyA), "Content-Type: application/json"});
    EXPECT_EQ(r.status, c.status) << c.what << ": " << r.body;
    ASSERT_TRUE(r.json.is_object()) << c.what << ": " << r.body;
    EXPECT_FALSE(r.json.at("error").at("message").as_string().empty()) << c.what;
  }
  auto no_type =
      Call("POST", base + "/v1/sandboxes", "{}", {"Authorization: Bearer " + std::string(kKeyA)});
  EXPECT_EQ(no_type.status, 415) << no_type.body;
  EXPECT_EQ(Call("GET", base + "/v1/sandboxes").status, 401);
  // Nothing was created, and the one sandbox is as it was: running, its workspace empty,
  // only its creation in the audit log.
  EXPECT_EQ(Running(), 1u);
  EXPECT_EQ(Api("GET", base + "/v1/sandboxes?include_ended=true", kKeyA)
                .json.at("sandboxes")
                .as_array()
                .size(),
            1u);
  EXPECT_EQ(AuditActions(base, kKeyA, ""), std::vector<std::string>{"sandbox_create"});
  EXPECT_EQ(Output(Exec(base, kKeyA, id, "ls /workspace | wc -l")), "0\n");
}

TEST_F(SandboxApiTest, ASecondHarnessAnswersForASandboxTheFirstMade) {
  auto first = StartHarness("first");
  auto second = StartHarness("second");
  const std::string id = Create(first->url(), kKeyA);
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(Exec(first->url(), kKeyA, id, "echo from-first > f").status, 200);
  auto got = Api("GET", second->url() + "/v1/sandboxes/" + id, kKeyA);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.json.at("sandbox").at("state").as_string(), "ready");
  auto ran = Exec(second->url(), kKeyA, id, "cat f");
  ASSERT_EQ(ran.status, 200) << ran.body;
  EXPECT_EQ(Output(ran), "from-first\n");
  // Even after the first is gone.
  first.reset();
  auto deleted = Call("DELETE", second->url() + "/v1/sandboxes/" + id, "",
                      {"Authorization: Bearer " + std::string(kKeyA)});
  EXPECT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(Running(), 0u);
}

TEST_F(SandboxApiTest, SnapshotForkPauseResumeAndCreateFromASnapshotKeepTheFiles) {
  auto h = StartHarness("h");
  const std::string base = h->url();
  const std::string id = Create(base, kKeyA);
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(Exec(base, kKeyA, id, "echo kept > /workspace/state").status, 200);
  auto snap = Api("POST", base + "/v1/sandboxes/" + id + "/snapshot", kKeyA);
  ASSERT_EQ(snap.status, 201) << snap.body;
  const std::string snapshot(snap.json.at("snapshot").at("id").as_string());

  auto forked = Api("POST", base + "/v1/sandboxes/" + id + "/fork", kKeyA, R"({"n": 2})");
  ASSERT_EQ(forked.status, 201) << forked.body;
  const auto& children = forked.json.at("sandboxes").as_array();
  ASSERT_EQ(children.size(), 2u);
  for (const auto& child : children) {
    const std::string cid(child.at("id").as_string());
    EXPECT_EQ(Output(Exec(base, kKeyA, cid, "cat /workspace/state")), "kept\n") << cid;
  }

  auto paused = Api("POST", base + "/v1/sandboxes/" + id + "/pause", kKeyA);
  ASSERT_EQ(paused.status, 200) << paused.body;
  EXPECT_EQ(paused.json.at("sandbox").at("state").as_string(), "paused");
  EXPECT_EQ(Exec(base, kKeyA, id, "echo while-paused").status, 409);
  auto resumed = Api("POST", base + "/v1/sandboxes/" + id + "/resume", kKeyA);
  ASSERT_EQ(resumed.status, 200) << resumed.body;
  EXPECT_EQ(resumed.json.at("sandbox").at("state").as_string(), "ready");
  EXPECT_EQ(Output(Exec(base, kKeyA, id, "cat /workspace/state")), "kept\n");

  const std::string restored = Create(base, kKeyA, R"({"from_snapshot": ")" + snapshot + R"("})");
  ASSERT_FALSE(restored.empty());
  EXPECT_EQ(Output(Exec(base, kKeyA, restored, "cat /workspace/state")), "kept\n");
  // Another tenant cannot create from it.
  auto theirs =
      Api("POST", base + "/v1/sandboxes", kKeyB, R"({"from_snapshot": ")" + snapshot + R"("})");
  EXPECT_EQ(theirs.status, 400) << theirs.body;
  auto actions = AuditActions(base, kKeyA, id);
  for (const char* action :
       {"sandbox_snapshot", "sandbox_fork", "sandbox_pause", "sandbox_resume"}) {
    EXPECT_NE(std::find(actions.begin(), actions.end(), action), actions.end()) << action;
  }
}

TEST_F(SandboxApiTest, TheCliCreatesExecutesListsAndRemovesASandbox) {
  auto h = StartHarness("h");
  const std::string base = h->url();
  CliResult created = Sinew(base, kKeyA, {"sandbox", "create", "--cpu-millis", "500"});
  ASSERT_EQ(created.exit, 0) << created.out;
  const std::string id = created.out.substr(0, created.out.find('\n'));
  ASSERT_EQ(id.size(), 32u) << created.out;
  CliResult ran =
      Sinew(base, kKeyA, {"sandbox", "exec", id, "--", "echo", "hi", "&&", "echo", "there"});
  EXPECT_EQ(ran.exit, 0) << ran.out;
  EXPECT_EQ(ran.out, "hi\nthere\n");
  CliResult failed = Sinew(base, kKeyA, {"sandbox", "exec", id, "--", "exit", "3"});
  EXPECT_EQ(failed.exit, 1) << "a command that fails fails the CLI: " << failed.out;
  CliResult listed = Sinew(base, kKeyA, {"sandbox", "ls"});
  EXPECT_EQ(listed.exit, 0);
  EXPECT_EQ(listed.out.rfind(id + "  ready", 0), 0u) << listed.out;
  CliResult theirs = Sinew(base, kKeyB, {"sandbox", "rm", id});
  EXPECT_EQ(theirs.exit, 2) << "another tenant's id is not found: " << theirs.out;
  CliResult removed = Sinew(base, kKeyA, {"sandbox", "rm", id});
  EXPECT_EQ(removed.exit, 0) << removed.out;
  EXPECT_NE(removed.out.find("deleted"), std::string::npos) << removed.out;
  EXPECT_EQ(Running(), 0u);
  EXPECT_EQ(Sinew(base, kKeyA, {"sandbox", "ls"}).out, "");
}

}  // namespace
}  // namespace sinew::harness::test
