// The provisioner with real runc containers: provision, tools through the agent,
// destroy and cleanup, warm pool, outcomes, bad requests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "sandboxd_process.h"
#include "sinew/proto/sandbox.grpc.pb.h"

namespace sinew::sandbox::testing {
namespace {

using ::testing::HasSubstr;

v1::SandboxInfo WaitEnded(ProvisionerClient& prov, const std::string& id) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    auto info = prov.Get(id);
    if (info.ok() && info->state() == v1::SANDBOX_STATE_ENDED) return *info;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "sandbox " << id << " did not end";
  return {};
}

TEST(SandboxdTest, ProvisionRunToolsDestroyLeavesNothing) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto box = d.client().Provision(SmallResources(), "session-1");
  ASSERT_TRUE(box.ok()) << box.status().ToString();
  EXPECT_EQ(box->state(), v1::SANDBOX_STATE_READY);
  EXPECT_FALSE(box->from_warm_pool());
  EXPECT_EQ(box->label(), "session-1");
  EXPECT_EQ(box->resources().memory_limit_bytes(), 256ull << 20);
  EXPECT_EQ(box->resources().network(), "none");
  EXPECT_EQ(box->resources().image(), "default");
  auto tools = SandboxClient::ConnectTo(*box);
  ASSERT_TRUE(tools.ok()) << tools.status().ToString();

  auto specs = (*tools)->ListTools();
  ASSERT_TRUE(specs.ok());
  EXPECT_EQ(specs->size(), 6u);

  auto who =
      Bash(**tools,
           "id -u; id -g; hostname; pwd; python3 -c 'print(6*7)'; git --version | cut -d' ' -f1");
  EXPECT_FALSE(who.is_error()) << who.output();
  EXPECT_EQ(who.output(), "1000\n1000\nsandbox\n/workspace\n42\ngit\n");

  auto w = (*tools)->Execute("write_file", R"({"path":"src/main.py","content":"print('hi')\n"})");
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->is_error()) << w->output();
  auto run = Bash(**tools, "python3 src/main.py");
  EXPECT_EQ(run.output(), "hi\n");
  auto r = (*tools)->Execute("read_file", R"({"path":"/workspace/src/main.py"})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->output(), "     1\tprint('hi')\n");

  std::string streamed;
  auto s = (*tools)->ExecuteStream(
      "bash", R"({"command":"echo a; echo b >&2"})",
      [&](bool err, std::string_view b) { streamed += (err ? "E" : "O") + std::string(b); });
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(streamed, "Oa\nEb\n");

  auto listed = d.client().List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].id(), box->id());

  auto ended = d.client().Destroy(box->id());
  ASSERT_TRUE(ended.ok()) << ended.status().ToString();
  EXPECT_EQ(ended->outcome(), v1::SANDBOX_OUTCOME_DESTROYED);
  EXPECT_EQ(ended->state(), v1::SANDBOX_STATE_ENDED);
  auto again = d.client().Destroy(box->id());  // idempotent
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->outcome(), v1::SANDBOX_OUTCOME_DESTROYED);
  auto got = d.client().Get(box->id());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->outcome(), v1::SANDBOX_OUTCOME_DESTROYED);

  EXPECT_TRUE(d.RuncContainers().empty());
  EXPECT_TRUE(d.Cgroups().empty());
  EXPECT_TRUE(d.SandboxDirs().empty());
  EXPECT_TRUE(d.Mounts().empty());
  auto after = (*tools)->Execute("bash", R"({"command":"true"})");
  EXPECT_FALSE(after.ok());
}

TEST(SandboxdTest, WarmPoolHandsOverAndRefills) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "1"});
  auto wait_warm = [&](uint32_t n) {
    for (int i = 0; i < 600; ++i) {
      auto h = d.client().Health();
      if (h.ok() && h->warm() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  ASSERT_TRUE(wait_warm(1));
  auto box = d.client().Provision(v1::Resources());  // the default shape is pooled from the start
  ASSERT_TRUE(box.ok()) << box.status().ToString();
  EXPECT_TRUE(box->from_warm_pool());
  auto tools = SandboxClient::ConnectTo(*box);
  ASSERT_TRUE(tools.ok());
  EXPECT_EQ(Bash(**tools, "echo warm").output(), "warm\n");
  EXPECT_TRUE(wait_warm(1));
  // A new shape is cold the first time, then pooled.
  auto small = d.client().Provision(SmallResources());
  ASSERT_TRUE(small.ok());
  EXPECT_FALSE(small->from_warm_pool());
  EXPECT_TRUE(wait_warm(2));
  auto small2 = d.client().Provision(SmallResources());
  ASSERT_TRUE(small2.ok());
  EXPECT_TRUE(small2->from_warm_pool());
  auto health = d.client().Health();
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->running(), 3u);
}

// A burst of provisions whose callers give up (a short deadline) behind one start slot:
// a start nobody waits for is skipped, one that finishes late is destroyed, so no
// sandbox is left running for a caller that gave up, and callers that wait all get
// theirs. The first start is held in `runc run` until every caller has given up, so
// that which starts end late does not depend on how fast runc is.
TEST(SandboxdTest, AProvisionWhoseCallerGaveUpIsNotLeftRunning) {
  GatedRunc runc;
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0", "--max-concurrent-starts", "1", "--runc", runc.path()});
  auto impatient = ProvisionerClient::Connect("127.0.0.1:" + std::to_string(d.port()),
                                              std::chrono::milliseconds(1300));
  ASSERT_TRUE(impatient.ok());
  std::vector<Result<v1::SandboxInfo>> results(6, Status::Internal("not run"));
  {
    std::vector<std::thread> callers;
    for (size_t i = 0; i < results.size(); ++i) {
      callers.emplace_back([&, i] {
        results[i] = (*impatient)->Provision(SmallResources(), "impatient-" + std::to_string(i));
      });
    }
    for (auto& t : callers) t.join();
  }
  for (const auto& r : results) {
    ASSERT_FALSE(r.ok()) << "handed over while its start was held at the gate";
    EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  }
  // Every caller has given up: the five in line were never started, and the held start,
  // let through now, ends late and is destroyed. Wait for that end, then nothing runs.
  runc.Open();
  auto late_start_ended = [&] {
    auto ended = d.client().List(/*include_ended=*/true);
    return ended.ok() && ended->size() == 1 && ended->front().state() == v1::SANDBOX_STATE_ENDED;
  };
  bool reached = false;
  for (int i = 0; i < 600 && !reached; ++i) {
    reached = late_start_ended();
    if (!reached) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(reached) << "the start held at the gate did not end after its caller gave up";
  auto ended = d.client().List(/*include_ended=*/true);
  ASSERT_TRUE(ended.ok());
  EXPECT_EQ(ended->front().outcome_detail(), "its caller gave up before it was handed over");
  auto listed = d.client().List();
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
  EXPECT_TRUE(d.RuncContainers().empty());
  // Callers that wait all get a sandbox, one start at a time.
  std::vector<Result<v1::SandboxInfo>> patient(3, Status::Internal("not run"));
  {
    std::vector<std::thread> callers;
    for (size_t i = 0; i < patient.size(); ++i) {
      callers.emplace_back([&, i] { patient[i] = d.client().Provision(SmallResources(), "patient"); });
    }
    for (auto& t : callers) t.join();
  }
  for (const auto& r : patient) EXPECT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(d.RuncContainers().size(), patient.size());
}

// Fair admission: one owner's burst does not starve another owner. With one start at a
// time and the first start held at the gate, owner "a" asks for eight sandboxes, then
// owner "b" for one: "b"'s container is the second to start (first come first served
// would make it the ninth), and every caller gets its sandbox.
TEST(SandboxdTest, AnotherOwnersProvisionIsNotStarvedByOneOwnersBurst) {
  GatedRunc runc;
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0", "--max-concurrent-starts", "1", "--runc", runc.path()});
  auto provision = [&](const std::string& owner) {
    v1::ProvisionRequest req;
    *req.mutable_resources() = SmallResources();
    req.set_owner(owner);
    req.set_label("burst-of-" + owner);
    return d.client().ProvisionWith(req);
  };
  // Waits until Health shows `starting` starts under way and `waiting` starts of `owner`
  // in line.
  auto await_line = [&](uint32_t starting, const std::string& owner, uint32_t waiting) {
    for (int i = 0; i < 600; ++i) {
      auto h = d.client().Health();
      if (h.ok() && h->starting() == starting) {
        auto it = h->waiting_starts().find(owner);
        if (it != h->waiting_starts().end() && it->second == waiting) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  std::vector<Result<v1::SandboxInfo>> burst(8, Status::Internal("not run"));
  Result<v1::SandboxInfo> other = Status::Internal("not run");
  std::vector<std::thread> callers;
  for (size_t i = 0; i < burst.size(); ++i) callers.emplace_back([&, i] { burst[i] = provision("a"); });
  const bool burst_in_line = await_line(1, "a", 7);
  if (burst_in_line) {
    callers.emplace_back([&] { other = provision("b"); });
  }
  const bool other_in_line = burst_in_line && await_line(1, "b", 1);
  runc.Open();
  for (auto& t : callers) t.join();
  ASSERT_TRUE(burst_in_line) << "the burst never showed in Health as one start and seven waiting";
  ASSERT_TRUE(other_in_line) << "the other owner's provision never showed in Health as waiting";
  for (const auto& r : burst) ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ(other->owner(), "b");

  const std::vector<std::string> runs = runc.Runs();
  ASSERT_EQ(runs.size(), burst.size() + 1);
  auto started_as = [&](const std::string& id) {
    for (size_t i = 0; i < runs.size(); ++i) {
      if (runs[i].size() >= id.size() && runs[i].compare(runs[i].size() - id.size(), id.size(), id) == 0) return i;
    }
    return runs.size();
  };
  EXPECT_EQ(started_as(other->id()), 1u) << "the other owner's start was not second";
  // The burst's starts fill the other places.
  std::vector<size_t> burst_places;
  for (const auto& r : burst) burst_places.push_back(started_as(r->id()));
  std::sort(burst_places.begin(), burst_places.end());
  EXPECT_EQ(burst_places, (std::vector<size_t>{0, 2, 3, 4, 5, 6, 7, 8}));
  auto h = d.client().Health();
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->starting(), 0u);
  EXPECT_TRUE(h->waiting_starts().empty());
  EXPECT_EQ(h->running(), burst.size() + 1);
}

// The gap the claim step closes: a Provision answer that never reaches its caller. A raw
// stub plays that caller: it asks for a claim step and never claims.
TEST(SandboxdTest, AHandOverNotClaimedInTimeIsEnded) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto stub = v1::Provisioner::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(d.port()), grpc::InsecureChannelCredentials()));
  auto call = [&](auto method, const auto& req, v1::SandboxInfo* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    return ((*stub).*method)(&ctx, req, resp);
  };
  v1::ProvisionRequest req;
  *req.mutable_resources() = SmallResources();
  req.set_claim_within_seconds(2);
  v1::SandboxInfo lost, kept, again;
  ASSERT_TRUE(call(&v1::Provisioner::Stub::Provision, req, &lost).ok());
  EXPECT_TRUE(lost.awaiting_claim());
  ASSERT_TRUE(call(&v1::Provisioner::Stub::Provision, req, &kept).ok());
  const auto kept_answered = std::chrono::steady_clock::now();
  v1::ClaimRequest claim;
  claim.set_id(kept.id());
  ASSERT_TRUE(call(&v1::Provisioner::Stub::Claim, claim, &again).ok());
  EXPECT_FALSE(again.awaiting_claim());
  ASSERT_TRUE(call(&v1::Provisioner::Stub::Claim, claim, &again).ok()) << "a claim is idempotent";

  v1::SandboxInfo ended = WaitEnded(d.client(), lost.id());
  EXPECT_EQ(ended.outcome(), v1::SANDBOX_OUTCOME_UNCLAIMED);
  EXPECT_THAT(ended.outcome_detail(), HasSubstr("did not claim it in time"));
  EXPECT_FALSE(ended.awaiting_claim());
  claim.set_id(lost.id());
  grpc::Status late = call(&v1::Provisioner::Stub::Claim, claim, &again);
  EXPECT_EQ(late.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(late.error_message(), HasSubstr("ended before it was claimed"));

  // The claimed one outlives its claim window and works.
  std::this_thread::sleep_until(kept_answered + std::chrono::seconds(3));
  auto info = d.client().Get(kept.id());
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state(), v1::SANDBOX_STATE_READY);
  auto tools = SandboxClient::ConnectTo(kept);
  ASSERT_TRUE(tools.ok());
  EXPECT_EQ(Bash(**tools, "echo kept").output(), "kept\n");
  EXPECT_EQ(d.RuncContainers(), std::vector<std::string>{kept.id()});

  // The client library claims for its caller.
  auto box = d.client().Provision(SmallResources());
  ASSERT_TRUE(box.ok()) << box.status().ToString();
  EXPECT_FALSE(box->awaiting_claim());

  // Bad claims and claim windows change nothing.
  req.set_claim_within_seconds(3601);
  grpc::Status bad = call(&v1::Provisioner::Stub::Provision, req, &again);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.error_message(), HasSubstr("claim_within_seconds"));
  claim.set_id("");
  EXPECT_EQ(call(&v1::Provisioner::Stub::Claim, claim, &again).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  claim.set_id("sb-nope");
  EXPECT_EQ(call(&v1::Provisioner::Stub::Claim, claim, &again).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(d.RuncContainers().size(), 2u);
}

TEST(SandboxdTest, AtTheLimitWarmSandboxesMakeRoomThenProvisionIsRefused) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "1", "--max-sandboxes", "2"});
  for (int i = 0; i < 600; ++i) {
    auto h = d.client().Health();
    if (h.ok() && h->warm() == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto first = d.client().Provision(SmallResources());  // cold: 1 warm + 1 running
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = d.client().Provision(SmallResources());  // the warm one makes room
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  auto third = d.client().Provision(SmallResources());
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("--max-sandboxes"));
  EXPECT_EQ(d.RuncContainers().size(), 2u);
  // The freed slot goes to the warm pool of that shape, which then hands it over.
  ASSERT_TRUE(d.client().Destroy(first->id()).ok());
  for (int i = 0; i < 600; ++i) {
    auto h = d.client().Health();
    if (h.ok() && h->warm() == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto fourth = d.client().Provision(SmallResources());
  ASSERT_TRUE(fourth.ok()) << fourth.status().ToString();
  EXPECT_TRUE(fourth->from_warm_pool());
}

TEST(SandboxdTest, BadRequestsGetSpecificErrors) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  v1::Resources r = SmallResources();
  r.set_memory_guaranteed_bytes(r.memory_limit_bytes() + 1);
  auto bad = d.client().Provision(r);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("memory_guaranteed_bytes"));

  r = SmallResources();
  r.set_network("host");
  bad = d.client().Provision(r);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("network 'host' is not supported"));

  r = SmallResources();
  r.set_image("no-such-image");
  bad = d.client().Provision(r);
  EXPECT_EQ(bad.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.status().message(), HasSubstr("build-image.sh no-such-image"));

  r = SmallResources();
  r.set_image("../etc");
  EXPECT_EQ(d.client().Provision(r).status().code(), StatusCode::kInvalidArgument);
  r = SmallResources();
  r.set_pids_limit(1);
  EXPECT_EQ(d.client().Provision(r).status().code(), StatusCode::kInvalidArgument);

  EXPECT_EQ(d.client().Destroy("sb-nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(d.client().Get("").status().code(), StatusCode::kInvalidArgument);
  auto health = d.client().Health();
  ASSERT_TRUE(health.ok());
  EXPECT_TRUE(health->ok());
  EXPECT_THAT(health->runtime(), HasSubstr("runc version"));
}

TEST(SandboxdTest, SecondDaemonOnTheSameStateDirRefusesToStart) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  auto box = d.client().Provision(SmallResources());
  ASSERT_TRUE(box.ok());
  std::string cmd = SandboxdProcess::BinDir() +
                    "/sinew-sandboxd --listen 127.0.0.1:0 --state-dir " + d.state_dir() +
                    " --cgroup-parent " + d.cgroup_parent() + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int status = pclose(p);
  EXPECT_NE(status, 0);
  EXPECT_THAT(out, HasSubstr("another sinew-sandboxd uses"));
  // The first daemon's sandbox was not touched.
  auto tools = SandboxClient::ConnectTo(*box);
  ASSERT_TRUE(tools.ok());
  EXPECT_EQ(Bash(**tools, "echo untouched").output(), "untouched\n");
}

TEST(SandboxdTest, LifetimeLimitEndsTheSandbox) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  v1::Resources r = SmallResources();
  r.set_lifetime_seconds(1);
  auto box = d.client().Provision(r);
  ASSERT_TRUE(box.ok());
  auto info = WaitEnded(d.client(), box->id());
  EXPECT_EQ(info.outcome(), v1::SANDBOX_OUTCOME_LIFETIME) << info.outcome_detail();
  EXPECT_THAT(info.outcome_detail(), HasSubstr("lifetime"));
  EXPECT_TRUE(d.RuncContainers().empty());
  EXPECT_TRUE(d.Cgroups().empty());
}

// An agent told to stop from the host (the runtime's SIGTERM; the sandbox's own code
// cannot signal it) shuts down cleanly, and the sandbox ends as EXITED with status 0.
TEST(SandboxdTest, AnAgentStoppedFromTheHostIsReportedAsExited) {
  SandboxdProcess d;
  d.Start({"--warm-pool-size", "0"});
  for (const std::string runtime : {"runc", "runsc"}) {
    SCOPED_TRACE(runtime);
    if (runtime == "runsc" && system("runsc --version >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "runsc (gVisor) is not installed: apt-get install runsc (runc was checked)";
    }
    v1::Resources r = SmallResources();
    r.set_runtime(runtime);
    auto box = d.client().Provision(r);
    ASSERT_TRUE(box.ok()) << box.status().ToString();
    const std::string stop =
        runtime + " --root " + d.state_dir() + "/" + runtime + " kill " + box->id() + " TERM";
    ASSERT_EQ(system(stop.c_str()), 0) << stop;
    auto info = WaitEnded(d.client(), box->id());
    EXPECT_EQ(info.outcome(), v1::SANDBOX_OUTCOME_EXITED) << info.outcome_detail();
    EXPECT_EQ(info.exit_code(), 0);
  }
  EXPECT_TRUE(d.Cgroups().empty());
  EXPECT_TRUE(d.SandboxDirs().empty());
}

}  // namespace
}  // namespace sinew::sandbox::testing
