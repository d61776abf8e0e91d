#include "sandboxd/oci_spec.h"

#include <boost/json.hpp>

#include "sandboxd/config.h"
#include "sandboxd/seccomp_profile.h"

namespace sinew::sandbox {
namespace {

namespace json = boost::json;

json::object Mount(std::string_view dest, std::string_view type, std::string_view source,
                   std::initializer_list<std::string_view> options) {
  json::array opts;
  for (auto o : options) opts.emplace_back(o);
  return {{"destination", dest}, {"type", type}, {"source", source}, {"options", opts}};
}

json::array BaseMounts() {
  return {
      Mount("/proc", "proc", "proc", {"nosuid", "noexec", "nodev"}),
      Mount("/dev", "tmpfs", "tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k"}),
      Mount("/dev/pts", "devpts", "devpts",
            {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}),
      Mount("/dev/shm", "tmpfs", "shm",
            {"nosuid", "noexec", "nodev", "mode=1777", "size=67108864"}),
      Mount("/dev/mqueue", "mqueue", "mqueue", {"nosuid", "noexec", "nodev"}),
      Mount("/sys", "sysfs", "sysfs", {"nosuid", "noexec", "nodev", "ro"}),
      Mount("/sys/fs/cgroup", "cgroup", "cgroup", {"nosuid", "noexec", "nodev", "relatime", "ro"}),
  };
}

json::array Strings(std::initializer_list<std::string_view> items) {
  json::array a;
  for (auto s : items) a.emplace_back(s);
  return a;
}

json::array MaskedPaths() {
  return Strings({"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                  "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
                  "/sys/firmware", "/sys/devices/virtual/powercap"});
}

json::array ReadonlyPaths() {
  return Strings({"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"});
}

json::array Namespaces(bool user, const std::string& user_path = {}) {
  json::array ns;
  for (auto t : {"pid", "network", "ipc", "uts", "mount", "cgroup"})
    ns.push_back(json::object{{"type", t}});
  if (user) {
    json::object u{{"type", "user"}};
    if (!user_path.empty()) u["path"] = user_path;
    ns.push_back(std::move(u));
  }
  return ns;
}

json::array IdMapping(uint32_t host_base) {
  return json::array{json::object{{"containerID", 0}, {"hostID", host_base}, {"size", kUidRangeSize}}};
}

}  // namespace

int64_t HostPidsLimit(uint32_t pids_limit, bool gvisor) {
  if (!gvisor) return pids_limit;
  // Under gVisor's ptrace platform the host cgroup holds the sentry's threads and one
  // stub process per guest address space, and a stub gains a host thread for every
  // sentry thread that ever runs a task of it (they are kept, and so are the stubs of
  // exited processes, for reuse). So the host tasks grow with the guest's processes
  // times the sentry's threads, and the sentry's threads with its runnable tasks (each
  // holds one while it runs guest code). A sentry refused a thread panics and takes the
  // sandbox down, so the ceiling is that product's bound: kStubSlack more address
  // spaces than processes (a fork's copy before its exec), at most pids_limit +
  // kSentryThreads sentry threads (2 vCPUs, --cpu-num-from-quota), and one more row for
  // the sentry's and the gofer's own threads. Measured (docs/sandbox.md): a fork bomb at
  // 128 processes reached 223 sentry threads and 116 stubs, 4,600 host tasks after 45 s
  // and still growing; this bound is 35,209.
  // The guest's processes are held to pids_limit by RLIMIT_NPROC in gVisor's kernel (the
  // agent's --max-processes). This ceiling is above a stock kernel.pid_max: what keeps the
  // host's PIDs from the sandboxes is the parent cgroup's budget (--host-pids-budget).
  constexpr int64_t kStubSlack = 8;
  constexpr int64_t kSentryThreads = 128;
  const int64_t processes = pids_limit;
  return (processes + kStubSlack + 1) * (processes + kSentryThreads + 1);
}

std::string BuildOciConfig(const OciParams& p) {
  const v1::Resources& r = p.resources;
  std::string agent = std::string(kAgentMountPoint);
  json::array args;
  if (!p.agent_static) args = {agent + "/ld.so", "--library-path", agent + "/lib"};
  std::vector<std::string> agent_args = {agent + "/sinew-sandbox-agent", "--sandbox-id", p.sandbox_id,
                                         "--workspace", kWorkspace, "--max-output-bytes",
                                         std::to_string(p.max_output_bytes)};
  // The agent starts as root inside and drops at once (before serving, before any
  // thread) to its own real and saved uid with the sandbox user's effective uid: what it
  // creates belongs to the sandbox user, yet that user's processes can neither signal nor
  // trace it (both need a match with its real or saved uid), which PID 1's protection
  // alone does not give under gVisor. See docs/sandbox.md, "The agent's identity".
  agent_args.insert(agent_args.end(), {"--drop-to-uid", std::to_string(kSandboxUid), "--drop-to-gid",
                                       std::to_string(kSandboxGid), "--agent-uid",
                                       std::to_string(kAgentUid)});
  if (p.gvisor) {
    agent_args.insert(agent_args.end(),
                      {"--socket", std::string(kRunMountPoint) + "/agent.sock", "--secret-env",
                       "SINEW_AGENT_SECRET",
                       // gVisor's kernel holds the sandbox user to the process limit (the
                       // host pids cgroup must also hold the sentry's threads). Not an OCI
                       // rlimit: runsc would apply that to the sentry on the host too.
                       "--max-processes", std::to_string(r.pids_limit())});
  } else {
    agent_args.insert(agent_args.end(), {"--listen-fd", std::to_string(kAgentListenFd),
                                         "--secret-fd", std::to_string(kAgentSecretFd)});
  }
  for (const auto& a : agent_args) args.emplace_back(a);
  json::array env = Strings({"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                             "HOME=/workspace", "LANG=C.UTF-8", "TERM=dumb"});
  if (p.gvisor) env.emplace_back("SINEW_AGENT_SECRET=" + p.agent_secret);
  json::object user = {{"uid", 0}, {"gid", 0}};
  // Only what the agent needs to change its ids; it drops them all at once.
  json::array drop = Strings({"CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"});
  json::object caps = {{"bounding", drop}, {"effective", drop}, {"permitted", drop},
                       {"inheritable", json::array()}, {"ambient", json::array()}};
  json::object process = {
      {"terminal", false},
      {"user", user},
      {"args", args},
      {"env", env},
      {"cwd", kWorkspace},
      {"capabilities", caps},
      {"noNewPrivileges", true},
  };
  // runc cannot prlimit a process in a user namespace it joined (EPERM), so the limits
  // are the agent's own job there (--max-open-files; it drops core dumps itself).
  if (p.userns_path.empty()) {
    process["rlimits"] =
        json::array{json::object{{"type", "RLIMIT_NOFILE"}, {"hard", 4096}, {"soft", 4096}},
                    json::object{{"type", "RLIMIT_CORE"}, {"hard", 0}, {"soft", 0}}};
  }
  json::array mounts = BaseMounts();
  mounts.push_back(
      Mount(kWorkspace, "tmpfs", "tmpfs", {"nosuid", "nodev", "mode=755", "uid=1000", "gid=1000"}));
  // Options that carry numbers are appended separately.
  mounts.back().at("options").as_array().emplace_back("size=" +
                                                      std::to_string(r.workspace_bytes()));
  mounts.push_back(
      Mount("/tmp", "tmpfs", "tmpfs", {"nosuid", "nodev", "mode=1777", "size=67108864"}));
  mounts.push_back(
      Mount(kAgentMountPoint, "bind", p.agent_dir, {"rbind", "ro", "nosuid", "nodev"}));
  if (p.gvisor) {
    mounts.push_back(Mount(kRunMountPoint, "bind", p.run_dir, {"rbind", "rw", "nosuid", "nodev", "noexec"}));
  }

  int64_t period = 100000;
  int64_t quota = static_cast<int64_t>(r.cpu_millicores()) * period / 1000;
  json::object memory = {{"limit", static_cast<int64_t>(r.memory_limit_bytes())},
                         {"reservation", static_cast<int64_t>(r.memory_guaranteed_bytes())}};
  if (p.memory_swap_accounting) memory["swap"] = static_cast<int64_t>(r.memory_limit_bytes());
  json::object resources = {
      {"devices", json::array{json::object{{"allow", false}, {"access", "rwm"}}}},
      {"memory", memory},
      {"cpu",
       {{"quota", quota},
        {"period", period},
        {"shares", std::max<int64_t>(2, static_cast<int64_t>(r.cpu_millicores()) * 1024 / 1000)}}},
      {"pids", {{"limit", HostPidsLimit(r.pids_limit(), p.gvisor)}}},
  };
  json::object linux_section = {
      {"resources", resources},           {"cgroupsPath", p.cgroups_path},
      {"namespaces", Namespaces(p.uid_base != 0, p.userns_path)}, {"maskedPaths", MaskedPaths()},
      {"readonlyPaths", ReadonlyPaths()},
  };
  // The same policy under either runtime: under gVisor its kernel applies the profile
  // (runsc --oci-seccomp) to the sandbox's processes, inside the sandbox.
  linux_section["seccomp"] = SeccompProfile(p.gvisor);
  if (p.uid_base != 0) {
    linux_section["uidMappings"] = IdMapping(p.uid_base);
    linux_section["gidMappings"] = IdMapping(p.uid_base);
  }
  json::object config = {
      {"ociVersion", "1.0.2"},
      {"process", process},
      {"root", {{"path", p.rootfs}, {"readonly", true}}},
      {"hostname", "sandbox"},
      {"mounts", mounts},
      {"linux", linux_section},
  };
  return json::serialize(config);
}

std::string BuildBareOciConfig(const std::string& rootfs, const std::vector<std::string>& args) {
  json::array jargs;
  for (const auto& a : args) jargs.emplace_back(a);
  json::object process = {{"terminal", false}, {"user", {{"uid", 0}, {"gid", 0}}},
                          {"args", jargs},     {"env", Strings({"PATH=/usr/bin:/bin"})},
                          {"cwd", "/"},        {"noNewPrivileges", true}};
  json::object linux_section = {
      {"namespaces", Namespaces(false)},
      {"resources", {{"devices", json::array{json::object{{"allow", false}, {"access", "rwm"}}}}}},
      {"maskedPaths", MaskedPaths()},
      {"readonlyPaths", ReadonlyPaths()}};
  json::object config = {{"ociVersion", "1.0.2"},
                         {"process", process},
                         {"root", {{"path", rootfs}, {"readonly", true}}},
                         {"hostname", "bare"},
                         {"mounts", BaseMounts()},
                         {"linux", linux_section}};
  return json::serialize(config);
}

}  // namespace sinew::sandbox
