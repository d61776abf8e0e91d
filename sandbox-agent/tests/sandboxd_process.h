// SandboxdProcess: runs a real sinew-sandboxd for a test, with its own state directory,
// cgroup parent and loopback port, so that tests can run side by side. The image comes
// from the ctest fixture (build-image.sh). Test helper, not a double.
//
// Thread-safety: not thread-safe; one per test.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "sinew/sandbox/provisioner_client.h"
#include "sinew/sandbox/sandbox_client.h"

namespace sinew::sandbox::testing {

class SandboxdProcess {
 public:
  // Unique names for this test process; the daemon is not started yet.
  SandboxdProcess();
  ~SandboxdProcess();  // SIGTERM, wait, then removes the state directory

  // Starts the daemon (extra flags appended) and waits until it answers Health, dialling
  // it with `client_tls` (plain by default; the daemon's --tls-* flags go in extra_flags).
  void Start(const std::vector<std::string>& extra_flags = {}, const GrpcTlsOptions& client_tls = {});
  // Starts it again on the port of the last start (fails the test if that port cannot be
  // bound: something still holds it).
  void Restart(const std::vector<std::string>& extra_flags = {}, const GrpcTlsOptions& client_tls = {});
  void Kill(int signal);  // sends `signal` and reaps the daemon
  ProvisionerClient& client() { return *client_; }

  const std::string& state_dir() const { return state_dir_; }
  const std::string& cgroup_parent() const { return cgroup_parent_; }
  int port() const { return port_; }
  uint32_t userns_uid_base() const { return userns_uid_base_; }
  pid_t pid() const { return pid_; }

  // Host-side views used to check that nothing leaked.
  std::vector<std::string> RuncContainers() const;  // ids from `runc list`
  std::vector<std::string> Cgroups() const;         // sandbox cgroups below the parent
  std::vector<std::string> SandboxDirs() const;     // state_dir/sandboxes/*
  std::vector<std::string> Mounts() const;          // mount points below state_dir (not agent/)
  // The parent cgroup directory in every hierarchy (v1 and v2) where it still exists.
  std::vector<std::string> ParentCgroups() const;

  static std::string BinDir();

 private:
  void TryStart(int port, const std::vector<std::string>& extra_flags, const GrpcTlsOptions& client_tls,
                bool* started);

  std::string state_dir_;
  std::string cgroup_parent_;
  uint32_t userns_uid_base_ = 0;
  int port_ = 0;
  pid_t pid_ = -1;
  std::unique_ptr<ProvisionerClient> client_;
};

// runc behind a gate the test holds: `runc run` (a sandbox's start) waits until Open(),
// so that a start lasts as long as the test says on any machine; every other command,
// and `run` once open, is the real runc. Pass path() to sinew-sandboxd's --runc.
class GatedRunc {
 public:
  GatedRunc();   // closed
  ~GatedRunc();  // removes the script and the gate; a `run` still waiting fails
  std::string path() const;
  void Open() const;
  // The arguments of every `run` so far (the container id last), one line each, in the
  // order the runs reached the gate.
  std::vector<std::string> Runs() const;

 private:
  std::string dir_;
};

// Runs `command` with bash in the sandbox and returns the result (fails the test on a
// transport error).
v1::ExecuteResult Bash(SandboxClient& client, const std::string& command, int timeout_s = 60);

// True while process `pid` exists and is not a zombie.
bool ProcessAlive(pid_t pid);

// Small resources for tests. Default: 256 MiB memory, 64 MiB workspace, 128 pids
v1::Resources SmallResources();

}  // namespace sinew::sandbox::testing
