#include "sandboxd/host_setup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "sandboxd/process.h"

namespace sinew::sandbox {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCgroupRoot = "/sys/fs/cgroup";

// The contents of a /proc file, "" when it cannot be read. With plain read(2): a process
// that exits while its file is read makes read fail with ESRCH, which libstdc++'s
// filebuf turns into an exception (it aborted sandboxd at startup while it swept /proc
// and a leftover process exited).
std::string ReadProcFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

bool IsCgroupV2() { return fs::exists(std::string(kCgroupRoot) + "/cgroup.controllers"); }

// Each hierarchy root below /sys/fs/cgroup: every v1 mount, and the v2 one of a hybrid host.
std::vector<std::string> Hierarchies() {
  std::vector<std::string> roots;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string f, mount_point;
    for (int k = 0; k < 5 && ss >> f; ++k) {
      if (k == 4) mount_point = f;
    }
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream rest(line.substr(dash + 3));
    std::string fstype;
    rest >> fstype;
    // v1 hierarchies, and on hybrid hosts the v2 one mounted beside them (runc makes the
    // sandbox's directory there too).
    if ((fstype == "cgroup" || fstype == "cgroup2") &&
        mount_point.rfind(std::string(kCgroupRoot) + "/", 0) == 0) {
      roots.push_back(mount_point);
    }
  }
  return roots;
}

uint64_t ReadKey(const std::string& file, const std::string& key) {
  std::ifstream in(file);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

}  // namespace

Result<bool> PrepareAgentDir(const std::string& agent_binary, const std::string& dest_dir) {
  std::error_code ec;
  if (!fs::is_regular_file(agent_binary, ec)) {
    return Status::FailedPrecondition("agent binary not found at " + agent_binary +
                                      " (build sinew-sandbox-agent or pass --agent-binary)");
  }
  SINEW_ASSIGN_OR_RETURN(auto ldd, RunProcess({"ldd", agent_binary}, std::chrono::seconds(30)));
  bool is_static = ldd.output.find("not a dynamic executable") != std::string::npos ||
                   ldd.output.find("statically linked") != std::string::npos;
  if (ldd.exit_code != 0 && !is_static) {
    return Status::FailedPrecondition("ldd " + agent_binary + " failed: " + ldd.output);
  }
  fs::remove_all(dest_dir, ec);
  fs::create_directories(fs::path(dest_dir) / "lib", ec);
  if (ec) return Status::IOError("cannot create " + dest_dir + ": " + ec.message());
  if (is_static) ldd.output.clear();
  std::istringstream in(ldd.output);
  std::string line;
  bool have_loader = false;
  while (std::getline(in, line)) {
    // "libx.so.1 => /lib/x86_64-linux-gnu/libx.so.1 (0x...)" or "/lib64/ld-linux-x86-64.so.2
    // (0x...)"
    std::istringstream ss(line);
    std::string first, arrow, target;
    ss >> first >> arrow >> target;
    std::string source, name;
    if (arrow == "=>" && !target.empty() && target[0] == '/') {
      source = target, name = first;
    } else if (!first.empty() && first[0] == '/') {
      source = first, name = "ld.so";
      have_loader = true;
    } else {
      continue;  // linux-vdso and the like
    }
    fs::path to = name == "ld.so" ? fs::path(dest_dir) / name : fs::path(dest_dir) / "lib" / name;
    fs::copy_file(source, to, fs::copy_options::overwrite_existing, ec);
    if (ec) return Status::IOError("cannot copy " + source + ": " + ec.message());
  }
  if (!have_loader && !is_static)
    return Status::FailedPrecondition("ldd named no dynamic loader for " + agent_binary);
  fs::copy_file(agent_binary, fs::path(dest_dir) / "sinew-sandbox-agent",
                fs::copy_options::overwrite_existing, ec);
  if (ec) return Status::IOError("cannot copy " + agent_binary + ": " + ec.message());
  fs::permissions(dest_dir,
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  ec);
  return is_static;
}

std::vector<std::string> CgroupDirs(const std::string& parent, const std::string& name) {
  if (IsCgroupV2()) return {std::string(kCgroupRoot) + "/" + parent + "/" + name};
  std::vector<std::string> dirs;
  for (const auto& root : Hierarchies()) dirs.push_back(root + "/" + parent + "/" + name);
  return dirs;
}

namespace {
// Writes `value` to the control file `path` (a cgroup's: no creation, no truncation).
Status WriteControl(const std::string& path, const std::string& value) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  const ssize_t n = ::write(fd, value.data(), value.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) return Status::IOError("cannot write " + path + ": " + std::strerror(err));
  return Status::Ok();
}

std::string ReadControl(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

Status FreezeCgroup(const std::string& parent, const std::string& name, bool frozen,
                    std::chrono::milliseconds wait) {
  const bool v2 = IsCgroupV2();
  const std::string dir = std::string(kCgroupRoot) + (v2 ? "" : "/freezer") + "/" + parent + "/" + name;
  const std::string control = dir + (v2 ? "/cgroup.freeze" : "/freezer.state");
  const std::string want = v2 ? (frozen ? "1" : "0") : (frozen ? "FROZEN" : "THAWED");
  const std::string undo = v2 ? "0" : "THAWED";
  // v1: the state reads FREEZING until every task is frozen; v2: cgroup.events says frozen.
  auto done = [&] {
    if (v2) return ReadControl(dir + "/cgroup.events").find(frozen ? "frozen 1" : "frozen 0") != std::string::npos;
    return ReadControl(control).rfind(frozen ? "FROZEN" : "THAWED", 0) == 0;
  };
  SINEW_RETURN_IF_ERROR(WriteControl(control, want));
  const auto until = std::chrono::steady_clock::now() + wait;
  auto retry_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  auto pause = std::chrono::microseconds(50);
  while (!done()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) {
      if (frozen) (void)WriteControl(control, undo);
      return Status::DeadlineExceeded("the cgroup " + dir + " did not " + (frozen ? "freeze" : "thaw") + " within " +
                                      std::to_string(wait.count()) + " ms");
    }
    if (frozen && now >= retry_at) {
      // A freeze can stay FREEZING while a task races it (one forking, or busy in the
      // kernel): thawed for a moment and asked again, as runc's own freezer does.
      SINEW_RETURN_IF_ERROR(WriteControl(control, undo));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      SINEW_RETURN_IF_ERROR(WriteControl(control, want));
      retry_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
      pause = std::chrono::microseconds(50);
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(2));
  }
  return Status::Ok();
}

std::vector<pid_t> CgroupProcesses(const std::string& parent, const std::string& name) {
  std::set<pid_t> pids;
  for (const auto& dir : CgroupDirs(parent, name)) {
    std::ifstream in(dir + "/cgroup.procs");
    pid_t pid;
    while (in >> pid) pids.insert(pid);
  }
  return std::vector<pid_t>(pids.begin(), pids.end());
}

uint64_t OomKills(const std::string& parent, const std::string& name) {
  std::string base =
      std::string(kCgroupRoot) + (IsCgroupV2() ? "" : "/memory") + "/" + parent + "/" + name;
  if (IsCgroupV2()) return ReadKey(base + "/memory.events", "oom_kill");
  return ReadKey(base + "/memory.oom_control", "oom_kill");
}

namespace {
uint64_t ReadNumber(const std::string& file) {
  std::ifstream in(file);
  uint64_t v = 0;
  in >> v;
  return in ? v : 0;
}
}  // namespace

CgroupUsage ReadCgroupUsage(const std::string& parent, const std::string& name) {
  CgroupUsage u;
  if (IsCgroupV2()) {
    std::string base = std::string(kCgroupRoot) + "/" + parent + "/" + name;
    u.memory_peak_bytes = ReadNumber(base + "/memory.peak");
    u.cpu_usage_ns = ReadKey(base + "/cpu.stat", "usage_usec") * 1000;
    return u;
  }
  for (const auto& root : Hierarchies()) {
    std::string base = root + "/" + parent + "/" + name;
    std::error_code ec;
    if (u.memory_peak_bytes == 0 && fs::exists(base + "/memory.max_usage_in_bytes", ec)) {
      u.memory_peak_bytes = ReadNumber(base + "/memory.max_usage_in_bytes");
    }
    if (u.cpu_usage_ns == 0 && fs::exists(base + "/cpuacct.usage", ec)) {
      u.cpu_usage_ns = ReadNumber(base + "/cpuacct.usage");
    }
  }
  return u;
}

bool HasMemorySwapAccounting() {
  return fs::exists(std::string(kCgroupRoot) + "/memory/memory.memsw.limit_in_bytes");
}

std::vector<std::string> ListCgroups(const std::string& parent) {
  std::set<std::string> names;
  std::vector<std::string> roots =
      IsCgroupV2() ? std::vector<std::string>{kCgroupRoot} : Hierarchies();
  for (const auto& root : roots) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root + "/" + parent, ec)) {
      if (e.is_directory(ec)) names.insert(e.path().filename().string());
    }
  }
  return {names.begin(), names.end()};
}

Status RemoveCgroups(const std::string& parent, const std::string& name) {
  std::string failed;
  for (const auto& dir : CgroupDirs(parent, name)) {
    std::error_code ec;
    if (!fs::exists(dir, ec)) continue;
    // Children first (runc may have made none, but a sandbox could have in v2).
    std::vector<fs::path> sub;
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec)) sub.push_back(it->path());
    }
    for (auto r = sub.rbegin(); r != sub.rend(); ++r) rmdir(r->c_str());
    if (rmdir(dir.c_str()) != 0 && errno != ENOENT) failed += " " + dir;
  }
  if (!failed.empty())
    return Status::IOError("cannot remove cgroups (processes still in them?):" + failed);
  return Status::Ok();
}

bool ProcessGone(pid_t pid) {
  const std::string content = ReadProcFile("/proc/" + std::to_string(pid) + "/stat");
  if (content.empty()) return true;
  auto close_paren = content.rfind(')');
  return close_paren != std::string::npos && close_paren + 2 < content.size() &&
         (content[close_paren + 2] == 'Z' || content[close_paren + 2] == 'X');
}

HostTaskLimits ReadHostTaskLimits() {
  return {ReadNumber("/proc/sys/kernel/pid_max"), ReadNumber("/proc/sys/kernel/threads-max")};
}

uint64_t DefaultHostPidsBudget(const HostTaskLimits& limits) {
  uint64_t smaller = limits.pid_max;
  if (smaller == 0 || (limits.threads_max != 0 && limits.threads_max < smaller)) {
    smaller = limits.threads_max;
  }
  return smaller / 2;
}

namespace {

// The parent's directory in the hierarchy that holds the pids controller ("" if none).
std::string PidsParentDir(const std::string& parent) {
  if (IsCgroupV2()) return std::string(kCgroupRoot) + "/" + parent;
  // A v1 hierarchy is mounted at a directory named after its controllers ("pids", or a
  // comma-separated list when several share it); the root holds no pids.* file to test.
  for (const auto& root : Hierarchies()) {
    std::string controllers = "," + fs::path(root).filename().string() + ",";
    if (controllers.find(",pids,") != std::string::npos) return root + "/" + parent;
  }
  return "";
}

bool WriteFile(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

Status SetParentPidsMax(const std::string& parent, uint64_t max) {
  std::string dir = PidsParentDir(parent);
  if (dir.empty()) return Status::FailedPrecondition("no pids cgroup hierarchy is mounted");
  if (IsCgroupV2()) (void)WriteFile(std::string(kCgroupRoot) + "/cgroup.subtree_control", "+pids");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IOError("cannot create " + dir + ": " + ec.message());
  if (!WriteFile(dir + "/pids.max", std::to_string(max))) {
    return Status::IOError("cannot set " + dir + "/pids.max to " + std::to_string(max) + ": " +
                           std::strerror(errno));
  }
  return Status::Ok();
}

bool RefusedByParentPidsLimit(const std::string& parent, const std::string& name) {
  std::string dir = PidsParentDir(parent);
  if (dir.empty()) return false;
  dir += "/" + name;
  uint64_t refused = ReadKey(dir + "/pids.events", "max");
  std::string own_max = ReadLine(dir + "/pids.max");
  std::string peak = ReadLine(dir + "/pids.peak");
  if (refused == 0 || own_max.empty() || peak.empty()) return false;
  return own_max == "max" ||
         std::strtoull(peak.c_str(), nullptr, 10) < std::strtoull(own_max.c_str(), nullptr, 10);
}

void RemoveCgroupParent(const std::string& parent) {
  std::vector<std::string> roots =
      IsCgroupV2() ? std::vector<std::string>{kCgroupRoot} : Hierarchies();
  for (const auto& root : roots) rmdir((root + "/" + parent).c_str());
}

void KillProcessesMentioning(const std::string& needle) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = std::stoi(name);
    if (pid == getpid()) continue;
    const std::string cmdline = ReadProcFile((e.path() / "cmdline").string());
    if (cmdline.find(needle) != std::string::npos) kill(pid, SIGKILL);
  }
}

void KillCgroupProcesses(const std::string& parent, const std::string& name) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    bool any = false;
    for (const auto& dir : CgroupDirs(parent, name)) {
      std::ifstream in(dir + "/cgroup.procs");
      pid_t pid;
      while (in >> pid) {
        kill(pid, SIGKILL);
        any = true;
      }
    }
    if (!any) return;
    usleep(20000);
  }
}

std::vector<pid_t> ZombieChildren(const std::string& comm) {
  const std::string self = std::to_string(getpid());
  std::vector<pid_t> zombies;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string pid_text = e.path().filename().string();
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split at the last ')'.
    const std::string stat = ReadProcFile((e.path() / "stat").string());
    const auto open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    std::istringstream fields(stat.substr(close + 1));
    std::string state, ppid;
    if (!(fields >> state >> ppid) || state != "Z" || ppid != self) continue;
    if (stat.compare(open + 1, close - open - 1, comm) == 0) zombies.push_back(std::stoi(pid_text));
  }
  return zombies;
}

std::vector<std::string> MountsBelow(const std::string& dir) {
  std::vector<std::string> found;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string f, mount_point;
    for (int k = 0; k < 5 && ss >> f; ++k) {
      if (k == 4) mount_point = f;
    }
    if (mount_point == dir || mount_point.rfind(dir + "/", 0) == 0) found.push_back(mount_point);
  }
  return found;
}

}  // namespace sinew::sandbox
