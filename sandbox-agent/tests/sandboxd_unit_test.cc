// The provisioner's pure parts, without runc: resource defaults and validation, and the
// OCI configuration it generates.
#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "sandboxd/config.h"
#include "sandboxd/host_setup.h"
#include "sandboxd/oci_spec.h"
#include "sandboxd/seccomp_profile.h"
#include "sandboxd/sandbox_manager.h"

namespace sinew::sandbox {
namespace {

using ::testing::HasSubstr;
namespace json = boost::json;

TEST(ResourcesTest, ZeroFieldsTakeDefaults) {
  auto r = NormalizeResources(v1::Resources(), ProvisionerConfig::DefaultResources());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->cpu_millicores(), 1000u);
  EXPECT_EQ(r->memory_limit_bytes(), 1ull << 30);
  EXPECT_EQ(r->memory_guaranteed_bytes(), 1ull << 30);
  EXPECT_EQ(r->pids_limit(), 256u);
  EXPECT_EQ(r->workspace_bytes(), 256ull << 20);
  EXPECT_EQ(r->lifetime_seconds(), 3600u);
  EXPECT_EQ(r->network(), "none");
  EXPECT_EQ(r->image(), "default");
}

TEST(ResourcesTest, RejectsOutOfRangeWithTheFieldName) {
  auto defaults = ProvisionerConfig::DefaultResources();
  auto check = [&](v1::Resources r, const std::string& field) {
    auto n = NormalizeResources(r, defaults);
    ASSERT_FALSE(n.ok()) << field;
    EXPECT_EQ(n.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(n.status().message(), HasSubstr(field));
  };
  v1::Resources r;
  r.set_cpu_millicores(1);
  check(r, "cpu_millicores");
  r = v1::Resources();
  r.set_memory_limit_bytes(1024);
  check(r, "memory_limit_bytes");
  r = v1::Resources();
  r.set_memory_limit_bytes(64 << 20);
  r.set_memory_guaranteed_bytes(128 << 20);
  check(r, "memory_guaranteed_bytes");
  r = v1::Resources();
  r.set_pids_limit(4);
  check(r, "pids_limit");
  r = v1::Resources();
  r.set_workspace_bytes(10);
  check(r, "workspace_bytes");
  r = v1::Resources();
  r.set_lifetime_seconds(30 * 24 * 3600);
  check(r, "lifetime_seconds");
  r = v1::Resources();
  r.set_network("bridge");
  check(r, "network");
  r = v1::Resources();
  r.set_image("../../etc");
  check(r, "image");
}

class OciSpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    OciParams p;
    p.rootfs = "/images/default/rootfs";
    p.agent_dir = "/state/agent";
    p.sandbox_id = "sb-1";
    p.uid_base = 1000000000;
    p.cgroups_path = "/sinew/sb-1";
    p.resources = *NormalizeResources(v1::Resources(), ProvisionerConfig::DefaultResources());
    p.resources.set_memory_guaranteed_bytes(512 << 20);
    p.resources.set_cpu_millicores(500);
    p.memory_swap_accounting = true;
    config_ = json::parse(BuildOciConfig(p)).as_object();
  }
  json::object config_;
};

// The agent starts as root inside with only what it needs to change its ids, and drops
// to its own real uid with the sandbox user's effective uid before it serves.
TEST_F(OciSpecTest, ReadOnlyRootAgentDropsToItsOwnUidNoNewPrivileges) {
  EXPECT_EQ(config_.at("root").at("readonly"), true);
  EXPECT_EQ(config_.at("root").at("path"), "/images/default/rootfs");
  const auto& process = config_.at("process").as_object();
  EXPECT_EQ(process.at("user").at("uid"), 0);
  EXPECT_EQ(process.at("noNewPrivileges"), true);
  const json::array only = {"CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"};
  for (const auto& set : process.at("capabilities").as_object()) {
    const bool held = set.key() == "bounding" || set.key() == "effective" || set.key() == "permitted";
    EXPECT_EQ(set.value().as_array(), held ? only : json::array()) << set.key();
  }
  EXPECT_EQ(process.at("args").as_array()[0], "/.sinew/agent/sinew-sandbox-agent");
  const std::string args = json::serialize(process.at("args"));
  EXPECT_THAT(args, HasSubstr("\"--drop-to-uid\",\"1000\",\"--drop-to-gid\",\"1000\",\"--agent-uid\",\"999\""));
}

TEST_F(OciSpecTest, NamespacesAndLimits) {
  const auto& linux_section = config_.at("linux").as_object();
  std::set<std::string> ns;
  for (const auto& n : linux_section.at("namespaces").as_array())
    ns.insert(std::string(n.at("type").as_string()));
  EXPECT_EQ(ns, (std::set<std::string>{"pid", "network", "ipc", "uts", "mount", "cgroup", "user"}));
  // Its own host id range: root inside is an unprivileged host uid without an account.
  for (const char* key : {"uidMappings", "gidMappings"}) {
    const auto& maps = linux_section.at(key).as_array();
    ASSERT_EQ(maps.size(), 1u) << key;
    EXPECT_EQ(maps[0].at("containerID"), 0);
    EXPECT_EQ(maps[0].at("hostID"), 1000000000);
    EXPECT_EQ(maps[0].at("size"), 65536);
  }
  const auto& res = linux_section.at("resources").as_object();
  EXPECT_EQ(res.at("memory").at("limit"), 1 << 30);
  EXPECT_EQ(res.at("memory").at("reservation"), 512 << 20);
  EXPECT_EQ(res.at("memory").at("swap"), 1 << 30);
  EXPECT_EQ(res.at("cpu").at("quota"), 50000);
  EXPECT_EQ(res.at("cpu").at("period"), 100000);
  EXPECT_EQ(res.at("pids").at("limit"), 256);
  EXPECT_EQ(linux_section.at("cgroupsPath"), "/sinew/sb-1");
}

TEST(OciSpecGvisorTest, ProcessLimitIsEnforcedInsideAndTheHostCeilingLeavesRoomForTheSentry) {
  OciParams p;
  p.rootfs = "/images/default/rootfs";
  p.agent_dir = "/state/agent";
  p.sandbox_id = "sb-1";
  p.cgroups_path = "/sinew/sb-1";
  p.resources = *NormalizeResources(v1::Resources(), ProvisionerConfig::DefaultResources());
  p.resources.set_pids_limit(100);
  p.gvisor = true;
  p.run_dir = "/state/sandboxes/sb-1/run";
  p.agent_secret = "s";
  auto config = json::parse(BuildOciConfig(p)).as_object();
  // Set by the agent inside gVisor's kernel, not as an OCI rlimit (runsc would put that on
  // the sentry's host process, whose threads it would then refuse).
  std::vector<std::string> args;
  for (const auto& a : config.at("process").at("args").as_array()) args.emplace_back(a.as_string());
  auto at = std::find(args.begin(), args.end(), "--max-processes");
  ASSERT_NE(at, args.end());
  ASSERT_NE(at + 1, args.end());
  EXPECT_EQ(*(at + 1), "100");
  for (const auto& l : config.at("process").at("rlimits").as_array()) {
    EXPECT_NE(l.at("type"), "RLIMIT_NPROC");
  }
  // Room for the ptrace platform's host tasks: stubs times sentry threads.
  EXPECT_EQ(config.at("linux").at("resources").at("pids").at("limit"), (100 + 9) * (100 + 129));
  EXPECT_EQ(HostPidsLimit(100, false), 100);
}

// The default budget of all sandboxes' host tasks is half of the smaller kernel limit, so
// that sandboxes can never take the PIDs (or threads) the host itself needs.
TEST(HostPidsBudgetTest, DefaultIsHalfOfTheSmallerKernelTaskLimit) {
  EXPECT_EQ(DefaultHostPidsBudget({32768, 192724}), 16384u);
  EXPECT_EQ(DefaultHostPidsBudget({4194304, 192724}), 96362u);
  EXPECT_EQ(DefaultHostPidsBudget({0, 1000}), 500u);  // pid_max unreadable
  EXPECT_EQ(DefaultHostPidsBudget({1000, 0}), 500u);
  EXPECT_EQ(DefaultHostPidsBudget({0, 0}), 0u);
  // One runsc sandbox's own ceiling is above the default budget of a stock host (pid_max
  // 32,768): the budget, not the ceiling, is what protects the host then.
  EXPECT_GT(static_cast<uint64_t>(HostPidsLimit(128, true)), DefaultHostPidsBudget({32768, 192724}));
}

TEST_F(OciSpecTest, WorkspaceIsSizeCappedAndAgentIsReadOnly) {
  bool workspace = false, agent = false;
  for (const auto& m : config_.at("mounts").as_array()) {
    std::string opts = json::serialize(m.at("options"));
    if (m.at("destination") == "/workspace") {
      workspace = true;
      EXPECT_EQ(m.at("type"), "tmpfs");
      EXPECT_THAT(opts, HasSubstr("\"size=268435456\""));
    } else if (m.at("destination") == "/.sinew/agent") {
      agent = true;
      EXPECT_THAT(opts, HasSubstr("\"ro\""));
    } else if (m.at("type") == "bind") {
      // No other host directory is mounted: in particular none that holds the socket.
      ADD_FAILURE() << "unexpected bind mount " << json::serialize(m);
    }
  }
  EXPECT_TRUE(workspace && agent);
  // The agent listens on the descriptor it inherits and reads its secret from a pipe.
  std::string args = json::serialize(config_.at("process").at("args"));
  EXPECT_THAT(args, HasSubstr("\"--listen-fd\",\"3\""));
  EXPECT_THAT(args, HasSubstr("\"--secret-fd\",\"4\""));
  EXPECT_THAT(args, HasSubstr("\"--sandbox-id\",\"sb-1\""));
}

TEST_F(OciSpecTest, SeccompRefusesDangerousCalls) {
  const auto& seccomp = config_.at("linux").at("seccomp").as_object();
  EXPECT_EQ(seccomp.at("defaultAction"), "SCMP_ACT_ALLOW");
  std::set<std::string> denied;
  for (const auto& rule : seccomp.at("syscalls").as_array()) {
    if (rule.at("action") != "SCMP_ACT_ERRNO" || rule.as_object().contains("args")) continue;
    for (const auto& n : rule.at("names").as_array()) denied.insert(std::string(n.as_string()));
  }
  for (const char* name : {"mount", "ptrace", "kexec_load", "bpf", "keyctl", "init_module",
                           "unshare", "setns", "reboot", "clone3", "open_by_handle_at"}) {
    EXPECT_TRUE(denied.count(name)) << name;
  }
  // Another process's scheduling cannot be changed (the agent's effective uid is the
  // sandbox user's): only pid 0, the caller, is allowed.
  std::set<std::string> self_only;
  for (const auto& rule : seccomp.at("syscalls").as_array()) {
    if (!rule.as_object().contains("args")) continue;
    const auto& arg = rule.at("args").as_array()[0];
    if (arg.at("op") != "SCMP_CMP_NE" || arg.at("value") != 0) continue;
    for (const auto& n : rule.at("names").as_array()) self_only.insert(std::string(n.as_string()));
  }
  EXPECT_EQ(self_only, (std::set<std::string>{"sched_setscheduler", "sched_setparam", "sched_setattr",
                                              "sched_setaffinity", "setpriority", "ioprio_set"}));
}

// runsc applies the same profile inside (--oci-seccomp), less the clone3 rule: runsc
// answers every refused call with EPERM, which would stop libc from making threads, and
// gVisor's kernel answers clone3 with ENOSYS itself.
TEST(OciSpecGvisorTest, TheSameSeccompProfileLessClone3) {
  OciParams p;
  p.rootfs = "/images/default/rootfs";
  p.agent_dir = "/state/agent";
  p.sandbox_id = "sb-1";
  p.cgroups_path = "/sinew/sb-1";
  p.resources = *NormalizeResources(v1::Resources(), ProvisionerConfig::DefaultResources());
  p.gvisor = true;
  p.run_dir = "/state/sandboxes/sb-1/run";
  p.agent_secret = "s";
  auto config = json::parse(BuildOciConfig(p)).as_object();
  json::array runc_rules = SeccompProfile(false).at("syscalls").as_array();
  runc_rules.erase(std::remove_if(runc_rules.begin(), runc_rules.end(),
                                  [](const json::value& r) { return r.at("names").as_array()[0] == "clone3"; }),
                   runc_rules.end());
  EXPECT_EQ(config.at("linux").at("seccomp").at("syscalls").as_array(), runc_rules);
  EXPECT_EQ(config.at("process").at("user").at("uid"), 0);
  const std::string args = json::serialize(config.at("process").at("args"));
  EXPECT_THAT(args, HasSubstr("\"--agent-uid\",\"999\""));
  EXPECT_THAT(args, HasSubstr("\"--socket\",\"/.sinew/run/agent.sock\""));
}

}  // namespace
}  // namespace sinew::sandbox
