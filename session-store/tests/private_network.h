// Machines on a private network, for partition tests: the test process moves into a
// network namespace of its own (EnterPrivateNetwork, before any thread starts), where a
// bridge joins it to one network namespace per "machine", each with its own address.
// Cutting a machine's link drops every packet to and from it (its peers see silence,
// not refused connections, as in a real partition); healing it lets the same TCP
// connections go on. Needs root and iproute2; nothing outside the test's namespace
// changes, and the machines' namespaces are deleted with the network.
#pragma once

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace sinew::store::test {

// Runs a command (argv[0] a path) and waits; true when it exited 0.
inline bool RunQuietly(const std::vector<std::string>& argv) {
  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

inline const char* IpBinary() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return nullptr;
}

// Moves this process into a new network namespace with its loopback up. Call while
// the process has one thread (a static initializer): a namespace belongs to a thread,
// and threads started later inherit it. Returns "" or why it could not.
inline std::string EnterPrivateNetwork() {
  if (IpBinary() == nullptr) return "iproute2's ip is not installed";
  if (::geteuid() != 0) return "needs root (network namespaces and links)";
  if (::unshare(CLONE_NEWNET) != 0) return std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
  if (!RunQuietly({IpBinary(), "link", "set", "lo", "up"})) return "could not bring the loopback up";
  return "";
}

class PrivateNetwork {
 public:
  // The bridge; the test process is `host()` on it.
  PrivateNetwork() {
    ok_ = Ip({"link", "add", kBridge, "type", "bridge"}) && Ip({"addr", "add", host() + "/24", "dev", kBridge}) &&
          Ip({"link", "set", kBridge, "up"});
  }
  ~PrivateNetwork() {
    // A machine's namespace lives on while a process of it does: its link is deleted
    // here (both ends of it), not left to the namespace.
    for (size_t n = 0; n < namespaces_.size(); ++n) {
      Ip({"link", "del", Link(static_cast<int>(n))});
      Ip({"netns", "del", namespaces_[n]});
    }
    Ip({"link", "del", kBridge});
  }
  PrivateNetwork(const PrivateNetwork&) = delete;
  PrivateNetwork& operator=(const PrivateNetwork&) = delete;

  bool ok() const { return ok_; }
  static std::string host() { return "10.77.0.1"; }

  // A new machine: its namespace and its link to the bridge. Returns its number (from
  // 0), or -1 when it could not be made.
  int AddMachine() {
    const int n = static_cast<int>(namespaces_.size());
    const std::string name = "sinew-" + std::to_string(::getpid()) + "-m" + std::to_string(n);
    const std::string link = Link(n), inside = "sinew-in" + std::to_string(n);
    if (!Ip({"netns", "add", name})) return -1;
    namespaces_.push_back(name);
    const bool made = Ip({"link", "add", link, "type", "veth", "peer", "name", inside}) &&
                      Ip({"link", "set", inside, "netns", name}) && Ip({"link", "set", link, "master", kBridge}) &&
                      Ip({"link", "set", link, "up"}) && Ip({"-n", name, "link", "set", "lo", "up"}) &&
                      Ip({"-n", name, "addr", "add", Address(n) + "/24", "dev", inside}) &&
                      Ip({"-n", name, "link", "set", inside, "up"});
    return made ? n : -1;
  }
  // The machine's address on the bridge.
  static std::string Address(int machine) { return "10.77.0." + std::to_string(11 + machine); }
  // argv that runs `argv` on the machine.
  std::vector<std::string> On(int machine, std::vector<std::string> argv) const {
    std::vector<std::string> out{IpBinary(), "netns", "exec", namespaces_.at(machine)};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }
  // Drops every packet to and from the machine, until Heal.
  bool Cut(int machine) { return Ip({"link", "set", Link(machine), "down"}); }
  bool Heal(int machine) { return Ip({"link", "set", Link(machine), "up"}); }

 private:
  static constexpr const char* kBridge = "sinew-br";
  static std::string Link(int machine) { return "sinew-m" + std::to_string(machine); }
  static bool Ip(std::vector<std::string> args) {
    args.insert(args.begin(), IpBinary());
    return RunQuietly(args);
  }
  bool ok_ = false;
  std::vector<std::string> namespaces_;
};

}  // namespace sinew::store::test
