// sinew-sandboxd: the provisioner daemon. See docs/sandbox.md for flags and behaviour.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <thread>

#include "sandboxd/host_registration.h"
#include "sandboxd/provisioner_service.h"
#include "sinew/grpc_tls.h"
#include "sinew/grpc_tls_flags.h"
#include "sandboxd/sandbox_manager.h"
#include "sinew/log.h"
#include "sinew/log_flags.h"

int main(int argc, char** argv) {
  sinew::sandbox::ProvisionerConfig config;
  std::string listen = "127.0.0.1:7702";
  CLI::App app{"sinew-sandboxd: provisions runc sandboxes that serve tools"};
  app.add_option("--listen", listen, "gRPC address (loopback)")->capture_default_str();
  app.add_option("--state-dir", config.state_dir, "runtime state; reaped on start")
      ->capture_default_str();
  app.add_option("--image-root", config.image_root, "image directory")->capture_default_str();
  app.add_option("--agent-binary", config.agent_binary,
                 "sinew-sandbox-agent (default: next to this binary)");
  app.add_option("--runc", config.runc, "runc binary")->capture_default_str();
  app.add_option("--runsc", config.runsc, "gVisor runsc binary (resources.runtime \"runsc\")")
      ->capture_default_str();
  std::string default_runtime = "runc";
  app.add_option("--runtime", default_runtime, "runtime of sandboxes that name none: runc or runsc")
      ->check(CLI::IsMember({"runc", "runsc"}))
      ->capture_default_str();
  app.add_option("--cgroup-parent", config.cgroup_parent, "parent cgroup name")
      ->capture_default_str();
  app.add_option("--host-pids-budget", config.host_pids_budget,
                 "host tasks all sandboxes together may hold (the parent cgroup's pids.max); 0: "
                 "half of min(kernel.pid_max, kernel.threads-max)")
      ->capture_default_str();
  app.add_option("--warm-pool-size", config.warm_pool_size, "ready sandboxes per shape (0: none)")
      ->capture_default_str();
  app.add_option("--max-warm-shapes", config.max_warm_shapes, "shapes with warm pools")
      ->capture_default_str();
  app.add_option("--max-sandboxes", config.max_sandboxes, "sandboxes at once")
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
  app.add_option("--max-concurrent-starts", config.max_concurrent_starts,
                 "containers starting at once; more wait their turn, owners taking turns (0: eight per CPU)")
      ->check(CLI::Range(0u, 4096u))
      ->capture_default_str();
  app.add_option("--max-output-bytes", config.max_output_bytes, "tool output cap inside sandboxes")
      ->check(CLI::Range(64u, 16u << 20))
      ->capture_default_str();
  app.add_option("--userns-uid-base", config.userns_uid_base,
                 "first host uid of the sandboxes' user-namespace ranges (65536 ids each); 0: no "
                 "user namespaces")
      ->capture_default_str();
  app.add_option("--snapshot-dir", config.snapshot_dir,
                 "snapshot store; kept across restarts (default: <state-dir>/snapshots)");
  app.add_option("--snapshot-bytes-per-owner", config.snapshot_bytes_per_owner,
                 "snapshot data each owner may hold, each chunk once (0: no cap)")
      ->capture_default_str();
  uint64_t mem = config.defaults.memory_limit_bytes(), ws = config.defaults.workspace_bytes();
  uint32_t cpu = config.defaults.cpu_millicores(), pids = config.defaults.pids_limit(),
           life = config.defaults.lifetime_seconds();
  app.add_option("--default-memory-bytes", mem, "default hard memory limit")->capture_default_str();
  app.add_option("--default-workspace-bytes", ws, "default workspace size")->capture_default_str();
  app.add_option("--default-cpu-millicores", cpu, "default CPU")->capture_default_str();
  app.add_option("--default-pids", pids, "default pids limit")->capture_default_str();
  app.add_option("--default-lifetime-seconds", life, "default lifetime")->capture_default_str();
  sinew::GrpcTlsOptions tls;
  sinew::AddGrpcTlsFlags(app, &tls, /*client=*/false);
  bool insecure = false;
  app.add_flag("--insecure", insecure, "allow plain gRPC (no mTLS) on a non-loopback --listen");
  sinew::logging::LogFlags log_flags;
  sinew::logging::AddLogFlags(app, &log_flags);
  // Scale-out (docs/scale-out.md): register this host in etcd for harnesses to place on.
  sinew::sandbox::HostRegistrationOptions reg;
  app.add_option("--etcd", reg.etcd, "etcd endpoint host:port; registers this host there (default: none)");
  app.add_option("--advertise", reg.advertise, "Provisioner address harnesses dial, host:port (with --etcd)");
  app.add_option("--host-id", reg.host_id, "this host's id in etcd (default: the host name)");
  app.add_option("--etcd-ttl", reg.ttl_seconds, "lease TTL in seconds: a crashed host is dropped after it")
      ->check(CLI::Range(1, 300))
      ->capture_default_str();
  sinew::AddGrpcTlsFlags(app, &reg.etcd_tls, /*client=*/true, "--etcd-tls");
  app.add_option("--capacity-memory-bytes", reg.memory_capacity_bytes,
                 "memory for sandboxes' guarantees, published for placement (default: MemTotal)");
  app.add_option("--capacity-cpu-millicores", reg.cpu_capacity_millicores,
                 "CPU for sandboxes, published for placement (default: 1000 per CPU)");
  CLI11_PARSE(app, argc, argv);
  if (auto logs = sinew::logging::SetupLogging("sinew-sandboxd", log_flags.format, log_flags.level); !logs.ok()) {
    std::cerr << "sinew-sandboxd: " << logs.ToString() << "\n";
    return 2;
  }
  if (auto files = sinew::CheckGrpcTlsFiles(tls); !files.ok()) {
    std::cerr << "sinew-sandboxd: " << files.message() << "\n";
    return 2;
  }
  if (auto files = sinew::CheckGrpcTlsFiles(reg.etcd_tls); !files.ok()) {
    std::cerr << "sinew-sandboxd: --etcd-tls: " << files.message() << "\n";
    return 2;
  }
  if (auto plain = sinew::CheckPlainGrpcOnlyOnLoopback(listen, tls.enabled(), insecure, "--insecure");
      !plain.ok()) {
    std::cerr << "sinew-sandboxd: " << plain.message() << "\n";
    return 2;
  }
  config.defaults.set_memory_limit_bytes(mem);
  config.defaults.set_workspace_bytes(ws);
  config.defaults.set_cpu_millicores(cpu);
  config.defaults.set_pids_limit(pids);
  config.defaults.set_lifetime_seconds(life);
  config.defaults.set_runtime(default_runtime);
  if (config.agent_binary.empty()) {
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    config.agent_binary = (self.parent_path() / "sinew-sandbox-agent").string();
  }
  if (geteuid() != 0) {
    std::cerr << "sinew-sandboxd: must run as root (runc, cgroups)\n";
    return 2;
  }
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // Only now: gRPC starts threads, which must inherit the blocked signals.
  auto credentials = sinew::GrpcServerCredentials(tls);
  if (!credentials.ok()) {
    std::cerr << "sinew-sandboxd: " << credentials.status().message() << "\n";
    return 2;
  }

  auto manager = sinew::sandbox::SandboxManager::Create(config);
  if (!manager.ok()) {
    std::cerr << "sinew-sandboxd: " << manager.status().ToString() << "\n";
    return 1;
  }
  sinew::sandbox::ProvisionerService service(**manager);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, *credentials, &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::cerr << "sinew-sandboxd: cannot listen on " << listen << "\n";
    return 1;
  }
  std::unique_ptr<sinew::sandbox::HostRegistration> registration;
  if (!reg.etcd.empty()) {
    if (reg.host_id.empty()) {
      char name[256] = {};
      ::gethostname(name, sizeof name - 1);
      reg.host_id = name;
    }
    auto r = sinew::sandbox::HostRegistration::Start(manager->get(), config, reg);
    if (!r.ok()) {
      std::cerr << "sinew-sandboxd: cannot register in etcd: " << r.status().ToString() << "\n";
      return 1;
    }
    registration = std::move(r).value();
  }
  std::cout << "sinew-sandboxd: listening on port " << port << std::endl;
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  });
  server->Wait();
  stopper.join();
  registration.reset();  // revokes the lease: harnesses stop placing here
  manager->reset();  // destroys every sandbox
  return 0;
}
