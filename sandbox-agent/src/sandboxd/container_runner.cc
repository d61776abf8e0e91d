#include "sandboxd/container_runner.h"

#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "sandboxd/host_setup.h"
#include "sandboxd/oci_spec.h"
#include "sandboxd/process.h"

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

bool IsGone(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string content((std::istreambuf_iterator<char>(in)), {});
  if (content.empty()) return true;
  auto close_paren = content.rfind(')');
  return close_paren != std::string::npos && close_paren + 2 < content.size() &&
         (content[close_paren + 2] == 'Z' || content[close_paren + 2] == 'X');
}

}  // namespace

ContainerRunner::ContainerRunner(const ProvisionerConfig& config) : config_(config) {}

std::vector<std::string> ContainerRunner::Runc(std::initializer_list<std::string> args) const {
  std::vector<std::string> argv = {config_.runc, "--root", runc_root()};
  argv.insert(argv.end(), args);
  return argv;
}

Status ContainerRunner::Init() {
  std::error_code ec;
  fs::create_directories(runc_root(), ec);
  fs::create_directories(config_.state_dir + "/sandboxes", ec);
  if (ec) return Status::IOError("cannot create " + config_.state_dir + ": " + ec.message());
  auto version = RunProcess({config_.runc, "--version"}, kRuncTimeout);
  if (!version.ok() || version->exit_code != 0) {
    return Status::FailedPrecondition("runc not usable at '" + config_.runc +
                                      "' (apt-get install runc, or pass --runc)");
  }
  SINEW_ASSIGN_OR_RETURN(agent_static_, PrepareAgentDir(config_.agent_binary, config_.state_dir + "/agent"));
  swap_accounting_ = HasMemorySwapAccounting();
  return Status::Ok();
}

std::vector<std::string> ContainerRunner::ReapLeftovers() {
  std::vector<std::string> reaped;
  // A runc that the previous instance started may still be creating a container.
  KillProcessesMentioning("--root\0" + runc_root() + "\0");
  if (auto list = RunProcess(Runc({"list", "-q"}), kRuncTimeout); list.ok()) {
    std::istringstream in(list->output);
    std::string id;
    while (in >> id) {
      (void)RunProcess(Runc({"kill", id, "KILL"}), kRuncTimeout);
      (void)RunProcess(Runc({"delete", "--force", id}), kRuncTimeout);
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
                                      "; build it with: sandbox-agent/image/build-image.sh " + name +
                                      " (SINEW_IMAGE_ROOT=" + config_.image_root + ")");
  }
  for (const char* mp : {kAgentMountPoint, kRunMountPoint, kWorkspace}) {
    if (!fs::is_directory(dir + "/rootfs" + mp, ec)) {
      return Status::FailedPrecondition("image '" + name + "' lacks the directory " + mp +
                                        " that sandboxes mount on; rebuild it with build-image.sh");
    }
  }
  return dir + "/rootfs";
}

Result<Container> ContainerRunner::Start(const std::string& id, const v1::Resources& resources) {
  SINEW_ASSIGN_OR_RETURN(std::string rootfs, ImageRootfs(resources.image()));
  Container c;
  c.id = id;
  c.dir = sandbox_dir(id);
  std::string run_dir = c.dir + "/run";
  std::error_code ec;
  fs::create_directories(c.dir + "/bundle", ec);
  fs::create_directories(run_dir, ec);
  if (ec) return Status::IOError("cannot create " + c.dir + ": " + ec.message());
  if (chown(run_dir.c_str(), kSandboxUid, kSandboxGid) != 0) return Status::IOError("chown " + run_dir);
  OciParams params;
  params.rootfs = rootfs;
  params.agent_dir = config_.state_dir + "/agent";
  params.run_dir = run_dir;
  params.cgroups_path = "/" + config_.cgroup_parent + "/" + id;
  params.resources = resources;
  params.memory_swap_accounting = swap_accounting_;
  params.max_output_bytes = config_.max_output_bytes;
  params.agent_static = agent_static_;
  {
    std::ofstream out(c.dir + "/bundle/config.json");
    out << BuildOciConfig(params);
    if (!out) return Status::IOError("cannot write " + c.dir + "/bundle/config.json");
  }
  std::string log = c.dir + "/agent.log";
  auto t_runc = std::chrono::steady_clock::now();
  auto run = RunProcess(Runc({"run", "--detach", "--pid-file", c.dir + "/pid", "--bundle", c.dir + "/bundle", id}),
                        kRuncTimeout, log);
  if (!run.ok() || run->exit_code != 0) {
    std::string why = run.ok() ? LogTail(id) : run.status().message();
    Remove(id);
    return Status::Internal("runc run failed for " + id + ": " + why);
  }
  {
    std::ifstream pid_in(c.dir + "/pid");
    pid_in >> c.init_pid;
  }
  if (c.init_pid <= 0) {
    Remove(id);
    return Status::Internal("runc wrote no pid for " + id);
  }
  auto t_agent = std::chrono::steady_clock::now();
  std::string socket_path = run_dir + "/agent.sock";
  c.endpoint = "unix://" + socket_path;
  auto deadline = std::chrono::steady_clock::now() + kAgentReadyTimeout;
  for (int spins = 0;; ++spins) {
    if (CanConnect(socket_path)) {
      auto now = std::chrono::steady_clock::now();
      spdlog::info("started {} (runc {} ms, agent {} ms)", id,
                   std::chrono::duration_cast<std::chrono::milliseconds>(t_agent - t_runc).count(),
                   std::chrono::duration_cast<std::chrono::milliseconds>(now - t_agent).count());
      return c;
    }
    if (IsGone(c.init_pid) || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(spins < 200 ? 250 : 5000));
  }
  std::string why = LogTail(id);
  kill(c.init_pid, SIGKILL);
  int status = 0;
  waitpid(c.init_pid, &status, 0);
  Remove(id);
  return Status::Internal("the agent of " + id + " did not start: " + (why.empty() ? "(no log)" : why));
}

void ContainerRunner::Remove(const std::string& id) {
  (void)RunProcess(Runc({"delete", "--force", id}), kRuncTimeout);
  (void)RemoveCgroups(config_.cgroup_parent, id);
  std::string dir = sandbox_dir(id);
  for (const auto& mp : MountsBelow(dir)) umount2(mp.c_str(), MNT_DETACH);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

std::string ContainerRunner::LogTail(const std::string& id) const {
  std::ifstream in(sandbox_dir(id) + "/agent.log");
  std::string content((std::istreambuf_iterator<char>(in)), {});
  if (content.size() > 2000) content = content.substr(content.size() - 2000);
  return content;
}

}  // namespace sinew::sandbox
