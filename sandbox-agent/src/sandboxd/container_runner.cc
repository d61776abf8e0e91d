#include "sandboxd/container_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "auth/agent_proof.h"
#include "sandboxd/host_setup.h"
#include "sandboxd/oci_spec.h"
#include "sandboxd/process.h"
#include "sandboxd/userns_holder.h"
#include "util/unique_fd.h"

namespace sinew::sandbox {

namespace fs = std::filesystem;

namespace {

constexpr auto kRuncTimeout = std::chrono::seconds(30);
constexpr auto kAgentReadyTimeout = std::chrono::seconds(20);

bool CanConnect(const std::string& socket_path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  socket_path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// Writes <dir>/bundle/config.json readable by root alone (under gVisor it holds the
// agent's secret).
Status WriteBundleConfig(const std::string& dir, const std::string& text) {
  std::string path = dir + "/bundle/config.json";
  UniqueFd file(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (file.get() < 0 || write(file.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return Status::IOError("cannot write " + path);
  }
  return Status::Ok();
}

// runsc: writes the agent's identity (socket_binder.h) whole into <dir>/run/listen,
// readable by root alone.
Status WriteIdentity(const Container& c) {
  const std::string tmp = c.dir + "/run/listen.tmp";
  const std::string text = c.id + "\n" + c.secret + "\n";
  {
    UniqueFd file(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (file.get() < 0 || write(file.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      return Status::IOError("cannot write " + tmp);
    }
  }
  if (rename(tmp.c_str(), (c.dir + "/run/listen").c_str()) != 0) {
    return Status::IOError("cannot rename " + tmp + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace

ContainerRunner::ContainerRunner(const ProvisionerConfig& config) : config_(config) {}

ContainerRunner::~ContainerRunner() {
  if (agent_mounted_) umount2((config_.state_dir + "/agent").c_str(), MNT_DETACH);
}

std::vector<std::string> ContainerRunner::Runc(std::initializer_list<std::string> args) const {
  return Runtime("runc", args);
}

std::vector<std::string> ContainerRunner::Runtime(const std::string& runtime,
                                                  std::initializer_list<std::string> args) const {
  std::vector<std::string> argv;
  if (runtime == "runsc") {
    // No network stack but loopback; unix sockets may be created in bind mounts (the
    // agent's socket directory is the only writable one). The sentry's CPUs (and so its
    // threads, which HostPidsLimit counts on) follow the sandbox's CPU quota, not the
    // host's core count.
    // --oci-seccomp: the spec's seccomp profile is applied inside, as runc applies it.
    argv = {config_.runsc, "--root", runsc_root(), "--network=none", "--host-uds=create",
            "--cpu-num-from-quota", "--oci-seccomp"};
  } else {
    argv = {config_.runc, "--root", runc_root()};
  }
  argv.insert(argv.end(), args);
  return argv;
}

std::string ContainerRunner::RuntimeOf(const std::string& id) const {
  std::lock_guard<std::mutex> lock(ids_mu_);
  auto it = runtimes_.find(id);
  return it == runtimes_.end() ? "runc" : it->second;
}

Status ContainerRunner::Init() {
  std::error_code ec;
  fs::create_directories(runc_root(), ec);
  fs::create_directories(config_.state_dir + "/sandboxes", ec);
  if (ec) return Status::IOError("cannot create " + config_.state_dir + ": " + ec.message());
  // One daemon per state directory: a second one would reap the first one's sandboxes.
  // The lock is held until the process exits (the descriptor is never closed).
  std::string lock_path = config_.state_dir + "/lock";
  int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    return Status::FailedPrecondition("another sinew-sandboxd uses " + config_.state_dir +
                                      " (lock " + lock_path +
                                      "); stop it or pass another --state-dir");
  }
  auto version = RunProcess({config_.runc, "--version"}, kRuncTimeout);
  if (!version.ok() || version->exit_code != 0) {
    return Status::FailedPrecondition("runc not usable at '" + config_.runc +
                                      "' (apt-get install runc, or pass --runc)");
  }
  runtime_version_ = version->output.substr(0, version->output.find('\n'));
  if (auto v = RunProcess({config_.runsc, "--version"}, kRuncTimeout); v.ok() && v->exit_code == 0) {
    runsc_version_ = v->output.substr(0, v->output.find('\n'));
    fs::create_directories(runsc_root(), ec);
  }
  SINEW_RETURN_IF_ERROR(CheckUidRange());
  // The agent's directory is a small tmpfs of its own, so that the bind mount of it in
  // each sandbox shows "/" as its root in mountinfo, not a host path.
  std::string agent_dir = config_.state_dir + "/agent";
  for (const auto& mp : MountsBelow(agent_dir)) umount2(mp.c_str(), MNT_DETACH);
  fs::create_directories(agent_dir, ec);
  if (mount("tmpfs", agent_dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=256m,mode=0755") != 0) {
    return Status::IOError("cannot mount a tmpfs on " + agent_dir + ": " + std::strerror(errno));
  }
  agent_mounted_ = true;
  SINEW_ASSIGN_OR_RETURN(agent_static_, PrepareAgentDir(config_.agent_binary, agent_dir));
  swap_accounting_ = HasMemorySwapAccounting();
  return Status::Ok();
}

Status ContainerRunner::CheckUidRange() const {
  if (config_.userns_uid_base == 0) return Status::Ok();
  const uint64_t first = config_.userns_uid_base;
  const uint64_t end = first + static_cast<uint64_t>(config_.max_sandboxes) * kUidRangeSize;
  if (first < 65536 || end > 0xFFFFFFFEull) {
    return Status::InvalidArgument("--userns-uid-base " + std::to_string(first) +
                                   " with --max-sandboxes " + std::to_string(config_.max_sandboxes) +
                                   " gives host ids [" + std::to_string(first) + ", " +
                                   std::to_string(end) + "), outside [65536, 4294967294)");
  }
  // No host account, group or subordinate range may fall inside ours.
  for (const char* file : {"/etc/passwd", "/etc/group"}) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
      std::vector<std::string> f;
      std::stringstream ss(line);
      std::string part;
      while (std::getline(ss, part, ':')) f.push_back(part);
      if (f.size() < 3) continue;
      uint64_t id = std::strtoull(f[2].c_str(), nullptr, 10);
      if (id >= first && id < end) {
        return Status::FailedPrecondition(std::string(file) + " has id " + f[2] + " (" + f[0] +
                                          ") inside the sandboxes' user-namespace range; choose "
                                          "another --userns-uid-base");
      }
    }
  }
  for (const char* file : {"/etc/subuid", "/etc/subgid"}) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
      auto c1 = line.find(':'), c2 = line.rfind(':');
      if (c1 == std::string::npos || c2 == c1) continue;
      uint64_t lo = std::strtoull(line.c_str() + c1 + 1, nullptr, 10);
      uint64_t n = std::strtoull(line.c_str() + c2 + 1, nullptr, 10);
      if (lo < end && lo + n > first) {
        return Status::FailedPrecondition(std::string(file) + " range '" + line +
                                          "' overlaps the sandboxes' user-namespace range; choose "
                                          "another --userns-uid-base");
      }
    }
  }
  return Status::Ok();
}

std::vector<std::string> ContainerRunner::ReapLeftovers() {
  std::vector<std::string> reaped;
  // A runc that the previous instance started may still be creating a container.
  KillProcessesMentioning("--root\0" + runc_root() + "\0");
  KillProcessesMentioning("--root\0" + runsc_root() + "\0");
  for (std::string runtime : {"runc", "runsc"}) {
    if (runtime == "runsc" && runsc_version_.empty()) continue;
    if (auto list = RunProcess(Runtime(runtime, {"list", "-q"}), kRuncTimeout); list.ok()) {
      std::istringstream in(list->output);
      std::string id;
      while (in >> id) {
        (void)RunProcess(Runtime(runtime, {"kill", id, "KILL"}), kRuncTimeout);
        (void)RunProcess(Runtime(runtime, {"delete", "--force", id}), kRuncTimeout);
      }
    }
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(config_.state_dir + "/sandboxes", ec)) {
    reaped.push_back(e.path().filename().string());
  }
  for (const auto& id : reaped) Remove(id);
  for (const auto& name : ListCgroups(config_.cgroup_parent)) {
    KillCgroupProcesses(config_.cgroup_parent, name);
    (void)RemoveCgroups(config_.cgroup_parent, name);
  }
  return reaped;
}

Result<std::string> ContainerRunner::ImageRootfs(const std::string& name) const {
  std::string dir = config_.image_root + "/" + name;
  std::error_code ec;
  if (!fs::exists(dir + "/READY", ec) || !fs::is_directory(dir + "/rootfs", ec)) {
    return Status::FailedPrecondition("image '" + name + "' is not built at " + dir +
                                      "; build it with: sandbox-agent/image/build-image.sh " +
                                      name + " (SINEW_IMAGE_ROOT=" + config_.image_root + ")");
  }
  for (const char* mp : {kAgentMountPoint, kRunMountPoint, kWorkspace}) {
    if (!fs::is_directory(dir + "/rootfs" + mp, ec)) {
      return Status::FailedPrecondition("image '" + name + "' lacks the directory " + mp +
                                        " that sandboxes mount on; rebuild it with build-image.sh");
    }
  }
  return dir + "/rootfs";
}

Result<uint32_t> ContainerRunner::AcquireUidBase(const std::string& id) {
  std::lock_guard<std::mutex> lock(ids_mu_);
  std::set<uint32_t> used;
  for (const auto& [other, slot] : uid_slots_) used.insert(slot);
  for (uint32_t slot = 0; slot < config_.max_sandboxes; ++slot) {
    if (used.count(slot)) continue;
    uid_slots_[id] = slot;
    return config_.userns_uid_base + slot * kUidRangeSize;
  }
  return Status::ResourceExhausted("every user-namespace uid range is in use");
}

void ContainerRunner::ReleaseUidBase(const std::string& id) {
  std::lock_guard<std::mutex> lock(ids_mu_);
  uid_slots_.erase(id);
}

size_t ContainerRunner::uid_ranges_in_use() const {
  std::lock_guard<std::mutex> lock(ids_mu_);
  return uid_slots_.size();
}

Status ContainerRunner::Freeze(const std::string& id) {
  // runc's own pause writes the same freezer file, after starting a process of its own.
  if (RuntimeOf(id) == "runc") {
    return FreezeCgroup(config_.cgroup_parent, id, true).WithContext("cannot freeze " + id);
  }
  auto r = RunProcess(Runtime(RuntimeOf(id), {"pause", id}), kRuncTimeout);
  if (!r.ok() || r->exit_code != 0) {
    return Status::Internal("cannot freeze " + id + ": " + (r.ok() ? r->output : r.status().message()));
  }
  return Status::Ok();
}

Status ContainerRunner::Thaw(const std::string& id) {
  if (RuntimeOf(id) == "runc") {
    return FreezeCgroup(config_.cgroup_parent, id, false).WithContext("cannot thaw " + id);
  }
  auto r = RunProcess(Runtime(RuntimeOf(id), {"resume", id}), kRuncTimeout);
  if (!r.ok() || r->exit_code != 0) {
    return Status::Internal("cannot thaw " + id + ": " + (r.ok() ? r->output : r.status().message()));
  }
  return Status::Ok();
}

Result<size_t> ContainerRunner::GvisorProcessesBesidesAgent(const std::string& id) const {
  // runsc's table (its JSON format holds pids only): a header naming the columns (UID, PID,
  // PPID, ...), then a process per line.
  auto r = RunProcess(Runtime("runsc", {"ps", id}), kRuncTimeout);
  if (!r.ok() || r->exit_code != 0) {
    return Status::Internal("cannot list the processes of " + id + ": " + (r.ok() ? r->output : r.status().message()));
  }
  std::istringstream lines(r->output);
  std::string line;
  int uid_col = -1, pid_col = -1, ppid_col = -1;
  size_t others = 0;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::vector<std::string> cols;
    for (std::string w; words >> w;) cols.push_back(w);
    if (pid_col < 0) {  // runsc may log a line before the header
      for (int c = 0; c < static_cast<int>(cols.size()); ++c) {
        if (cols[c] == "UID") uid_col = c;
        if (cols[c] == "PID") pid_col = c;
        if (cols[c] == "PPID") ppid_col = c;
      }
      if (uid_col < 0 || ppid_col < 0) pid_col = -1;
      continue;
    }
    const int need = std::max({uid_col, pid_col, ppid_col});
    if (static_cast<int>(cols.size()) <= need) continue;
    const bool agent = cols[pid_col] == "1";
    const bool binder = cols[uid_col] == "0" && cols[ppid_col] == "1";
    if (!agent && !binder) ++others;
  }
  if (pid_col < 0) return Status::Internal("runsc ps of " + id + " printed no process table: " + r->output.substr(0, 200));
  return others;
}

Result<Container> ContainerRunner::Start(const std::string& id, const v1::Resources& resources,
                                         const std::string& secret, const std::string& checkpoint_image) {
  SINEW_ASSIGN_OR_RETURN(std::string rootfs, ImageRootfs(resources.image()));
  if (resources.runtime() == "runsc") return StartGvisor(id, resources, rootfs, secret, checkpoint_image);
  if (!checkpoint_image.empty()) return Status::FailedPrecondition("a checkpoint is restored under runsc only");
  Container c;
  c.id = id;
  c.dir = sandbox_dir(id);
  std::error_code ec;
  fs::create_directories(c.dir + "/bundle", ec);
  if (ec) return Status::IOError("cannot create " + c.dir + ": " + ec.message());
  // Only the host (root) can reach anything here: nothing of it is mounted in a sandbox.
  chmod(c.dir.c_str(), 0711);
  uint32_t uid_base = 0;
  if (config_.userns_uid_base != 0) {
    auto base = AcquireUidBase(id);
    if (!base.ok()) {
      Remove(id);
      return base.status();
    }
    uid_base = *base;
    c.host_uid = uid_base + kSandboxUid;
  }
  c.secret = secret.empty() ? RandomHex(16) : secret;
  // The agent's socket, bound here (on the host, in a directory the sandbox cannot see)
  // and listened on by the agent through the inherited descriptor.
  std::string socket_path = c.dir + "/agent.sock";
  UniqueFd sock(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    Remove(id);
    return Status::FailedPrecondition("socket path too long (shorten --state-dir): " + socket_path);
  }
  socket_path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
  if (sock.get() < 0 || bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    Remove(id);
    return Status::IOError("cannot bind " + socket_path + ": " + std::strerror(err));
  }
  chmod(socket_path.c_str(), 0660);
  int secret_pipe[2];
  if (pipe2(secret_pipe, O_CLOEXEC) != 0) {
    Remove(id);
    return Status::IOError(std::string("pipe: ") + std::strerror(errno));
  }
  UniqueFd secret_read(secret_pipe[0]);
  {
    UniqueFd secret_write(secret_pipe[1]);
    if (write(secret_write.get(), c.secret.data(), c.secret.size()) !=
        static_cast<ssize_t>(c.secret.size())) {
      Remove(id);
      return Status::IOError("cannot hand the secret to " + id);
    }
  }
  OciParams params;
  params.rootfs = rootfs;
  params.agent_dir = config_.state_dir + "/agent";
  params.sandbox_id = id;
  params.uid_base = uid_base;
  std::optional<UsernsHolder> holder;
  if (uid_base != 0) {
    auto h = UsernsHolder::Create(uid_base, kUidRangeSize);
    if (!h.ok()) {
      Remove(id);
      return h.status();
    }
    holder.emplace(std::move(*h));
    params.userns_path = holder->ns_path();
  }
  params.cgroups_path = "/" + config_.cgroup_parent + "/" + id;
  params.resources = resources;
  params.memory_swap_accounting = swap_accounting_;
  params.max_output_bytes = config_.max_output_bytes;
  params.agent_static = agent_static_;
  if (Status written = WriteBundleConfig(c.dir, BuildOciConfig(params)); !written.ok()) {
    Remove(id);
    return written;
  }
  std::string log = c.dir + "/agent.log";
  auto run = RunProcess(Runc({"run", "--detach", "--preserve-fds", "2", "--pid-file",
                              c.dir + "/pid", "--bundle", c.dir + "/bundle", id}),
                        kRuncTimeout, log, {sock.get(), secret_read.get()});
  sock = UniqueFd();
  secret_read = UniqueFd();
  holder.reset();  // the container's processes keep the namespace now
  return AwaitAgent(std::move(c), "runc", run, socket_path);
}

Result<Container> ContainerRunner::StartGvisor(const std::string& id, const v1::Resources& resources,
                                               const std::string& rootfs, const std::string& secret,
                                               const std::string& checkpoint_image) {
  if (runsc_version_.empty()) {
    return Status::FailedPrecondition("runtime 'runsc' asked for, but '" + config_.runsc +
                                      "' is not usable here (apt-get install runsc, or pass --runsc)");
  }
  Container c;
  c.id = id;
  c.dir = sandbox_dir(id);
  {
    std::lock_guard<std::mutex> lock(ids_mu_);
    runtimes_[id] = "runsc";
  }
  std::error_code ec;
  fs::create_directories(c.dir + "/bundle", ec);
  fs::create_directories(c.dir + "/run", ec);
  if (ec) {
    Remove(id);
    return Status::IOError("cannot create " + c.dir + ": " + ec.message());
  }
  chmod(c.dir.c_str(), 0711);
  // root's alone: inside, only the agent before it drops its privileges, and its socket
  // binder, which stays root (socket_binder.h), reach it.
  chmod((c.dir + "/run").c_str(), 0700);
  c.secret = secret.empty() ? RandomHex(16) : secret;
  OciParams params;
  params.rootfs = rootfs;
  params.agent_dir = config_.state_dir + "/agent";
  params.sandbox_id = id;
  params.cgroups_path = "/" + config_.cgroup_parent + "/" + id;
  params.resources = resources;
  params.memory_swap_accounting = swap_accounting_;
  params.max_output_bytes = config_.max_output_bytes;
  params.agent_static = agent_static_;
  params.gvisor = true;
  params.run_dir = c.dir + "/run";
  params.agent_secret = c.secret;
  if (Status written = WriteBundleConfig(c.dir, BuildOciConfig(params)); !written.ok()) {
    Remove(id);
    return written;
  }
  // --panic-log: a sentry that dies (a Go panic exits with status 2) says why there.
  Result<ProcessResult> run = Status::Internal("not run");
  if (checkpoint_image.empty()) {
    run = RunProcess(Runtime("runsc", {"--panic-log", c.dir + "/panic.log", "run", "--detach", "--pid-file",
                                       c.dir + "/pid", "--bundle", c.dir + "/bundle", id}),
                     kRuncTimeout, c.dir + "/agent.log");
  } else {
    // The restored agent waits for its identity before it binds its socket again.
    if (Status told = WriteIdentity(c); !told.ok()) {
      Remove(id);
      return told;
    }
    run = RunProcess(Runtime("runsc", {"--panic-log", c.dir + "/panic.log", "restore", "--image-path",
                                       checkpoint_image, "--detach", "--pid-file", c.dir + "/pid",
                                       "--bundle", c.dir + "/bundle", id}),
                     kRuncTimeout, c.dir + "/agent.log");
  }
  const std::string socket_path = c.dir + "/run/agent.sock";
  const std::string listen_path = c.dir + "/run/listen";
  auto started = AwaitAgent(std::move(c), "runsc", run, socket_path);
  if (started.ok() && !checkpoint_image.empty()) {
    std::error_code removed;
    fs::remove(listen_path, removed);  // read: the agent serves
  }
  return started;
}

Status ContainerRunner::QuiesceAgent(const Container& c) {
  const std::string socket_path = c.dir + "/run/agent.sock";
  const std::string quiet_path = c.dir + "/run/quiet";
  std::error_code ec;
  fs::remove(c.dir + "/run/listen", ec);
  fs::remove(quiet_path, ec);
  auto r = RunProcess(Runtime("runsc", {"kill", c.id, "USR1"}), kRuncTimeout);
  if (!r.ok() || r->exit_code != 0) {
    return Status::Internal("cannot signal the agent of " + c.id + ": " + (r.ok() ? r->output : r.status().message()));
  }
  // No new connection from here on; the binder binds anew at this path later (after the
  // restore, in a restored copy's own directory). gVisor lets go of its host socket once
  // it sees the file gone.
  fs::remove(socket_path, ec);
  // The agent closes its server and connections (within its 200 ms grace for calls) and
  // its listening socket; then its binder writes `quiet`.
  const auto deadline = std::chrono::steady_clock::now() + kAgentReadyTimeout;
  while (!fs::exists(quiet_path, ec)) {
    if (ProcessGone(c.init_pid) || std::chrono::steady_clock::now() > deadline) {
      (void)ReleaseAgent(c);
      return Status::Internal("the agent of " + c.id + " did not close its sockets for a checkpoint: " +
                              LogTail(c.id));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  fs::remove(quiet_path, ec);
  return Status::Ok();
}

Status ContainerRunner::ReleaseAgent(const Container& c) {
  SINEW_RETURN_IF_ERROR(WriteIdentity(c));
  const std::string socket_path = c.dir + "/run/agent.sock";
  const auto deadline = std::chrono::steady_clock::now() + kAgentReadyTimeout;
  while (!CanConnect(socket_path)) {
    if (ProcessGone(c.init_pid) || std::chrono::steady_clock::now() > deadline) {
      return Status::Internal("the agent of " + c.id + " did not serve again after a checkpoint: " + LogTail(c.id));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::error_code ec;
  fs::remove(c.dir + "/run/listen", ec);
  return Status::Ok();
}

Status ContainerRunner::Checkpoint(const std::string& id, const std::string& image_dir) {
  auto r = RunProcess(Runtime("runsc", {"checkpoint", "--image-path", image_dir, id}), kRuncTimeout);
  if (!r.ok() || r->exit_code != 0) {
    std::string why = r.ok() ? r->output : r.status().message();
    if (std::string panic = SentryPanic(id); !panic.empty()) why += "; the sentry: " + panic;
    return Status::Internal("runsc checkpoint of " + id + " failed: " + why);
  }
  return Status::Ok();
}

Result<Container> ContainerRunner::AwaitAgent(Container c, const std::string& runtime,
                                              const Result<ProcessResult>& run,
                                              const std::string& socket_path) {
  const std::string& id = c.id;
  if (!run.ok() || run->exit_code != 0) {
    std::string why = run.ok() ? LogTail(id) : run.status().message();
    Remove(id);
    return Status::Internal(runtime + " run failed for " + id + ": " + why);
  }
  {
    std::ifstream pid_in(c.dir + "/pid");
    pid_in >> c.init_pid;
  }
  if (c.init_pid <= 0) {
    Remove(id);
    return Status::Internal(runtime + " wrote no pid for " + id);
  }
  const auto t_agent = std::chrono::steady_clock::now();
  c.endpoint = "unix://" + socket_path;
  const auto deadline = t_agent + kAgentReadyTimeout;
  for (int spins = 0;; ++spins) {
    if (CanConnect(socket_path)) {
      spdlog::info("started {} under {} (agent ready {} ms after the runtime returned)", id, runtime,
                   std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - t_agent)
                       .count());
      return c;
    }
    if (ProcessGone(c.init_pid) || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(spins < 200 ? 250 : 5000));
  }
  std::string why = LogTail(id);
  kill(c.init_pid, SIGKILL);
  int status = 0;
  waitpid(c.init_pid, &status, 0);
  Remove(id);
  return Status::Internal("the agent of " + id + " did not start under " + runtime + ": " +
                          (why.empty() ? "(no log)" : why));
}

void ContainerRunner::ReapGofer(const std::string& id) const {
  std::ifstream in(runsc_root() + "/" + id + "_sandbox:" + id + ".state");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  boost::system::error_code ec;
  const boost::json::value state = boost::json::parse(text, ec);
  if (ec || !state.is_object()) return;
  const boost::json::value* pid_value = state.as_object().if_contains("goferPid");
  if (pid_value == nullptr || !pid_value->is_int64() || pid_value->as_int64() <= 0) return;
  const pid_t gofer = static_cast<pid_t>(pid_value->as_int64());
  int status = 0;
  // Ours (re-parented here) and not reaped yet: only then is the pid surely the gofer's.
  if (waitpid(gofer, &status, WNOHANG) != 0) return;
  kill(gofer, SIGKILL);
  waitpid(gofer, &status, 0);
}

void ContainerRunner::Remove(const std::string& id) {
  // runsc's gofer is re-parented to this daemon (the sandboxes' subreaper) when `runsc
  // run` exits; `runsc delete` waits seconds for it to be gone, and a zombie never is.
  if (RuntimeOf(id) == "runsc") ReapGofer(id);
  (void)RunProcess(Runtime(RuntimeOf(id), {"delete", "--force", id}), kRuncTimeout);
  (void)RemoveCgroups(config_.cgroup_parent, id);
  std::string dir = sandbox_dir(id);
  for (const auto& mp : MountsBelow(dir)) umount2(mp.c_str(), MNT_DETACH);
  std::error_code ec;
  fs::remove_all(dir, ec);
  // Last: the uid range is free only once nothing of the sandbox is left.
  ReleaseUidBase(id);
  std::lock_guard<std::mutex> lock(ids_mu_);
  runtimes_.erase(id);
}

namespace {
std::string FileTail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path);
  std::string content((std::istreambuf_iterator<char>(in)), {});
  if (content.size() > max_bytes) content = content.substr(content.size() - max_bytes);
  return content;
}
}  // namespace

std::string ContainerRunner::LogTail(const std::string& id) const {
  return FileTail(sandbox_dir(id) + "/agent.log", 2000);
}

std::string ContainerRunner::SentryPanic(const std::string& id) const {
  if (RuntimeOf(id) != "runsc") return {};
  std::ifstream in(sandbox_dir(id) + "/panic.log");
  // The first lines name the cause ("panic: ...", "fatal error: ..."); goroutine dumps follow.
  std::string line, cause;
  while (std::getline(in, line) && cause.size() < 1000) {
    if (line.empty() && !cause.empty()) break;
    if (!line.empty()) cause += (cause.empty() ? "" : "; ") + line;
  }
  return cause;
}

}  // namespace sinew::sandbox
