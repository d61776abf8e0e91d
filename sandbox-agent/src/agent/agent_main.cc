// sinew-sandbox-agent: serves the Sandbox gRPC service on a unix socket. Runs as PID 1
// of a sandbox container (see docs/sandbox.md); also runs on a host for tests.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <thread>

#include "agent/agent_service.h"
#include "agent/child_reaper.h"
#include "agent/tools.h"

int main(int argc, char** argv) {
  CLI::App app{"sinew-sandbox-agent: tools for a model, served on a unix socket"};
  std::string socket_path;
  sinew::sandbox::ToolConfig config;
  std::string workspace = config.workspace.string();
  app.add_option("--socket", socket_path, "unix socket to listen on")->required();
  app.add_option("--workspace", workspace, "workspace directory")->capture_default_str();
  app.add_option("--max-output-bytes", config.max_output_bytes, "cap of a tool's output")
      ->check(CLI::Range(size_t{64}, size_t{16} << 20))
      ->capture_default_str();
  app.add_option("--default-timeout", config.default_timeout_s, "bash timeout in seconds when none is given")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--max-timeout", config.max_timeout_s, "largest bash timeout accepted, seconds")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  config.workspace = workspace;

  // SIGTERM/SIGINT are handled by a thread (as PID 1 they would otherwise be ignored).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  (void)sinew::sandbox::ChildReaper::Instance();

  std::error_code ec;
  std::filesystem::remove(socket_path, ec);
  sinew::sandbox::ToolRegistry registry(config);
  sinew::sandbox::AgentService service(registry);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket_path, grpc::InsecureServerCredentials());
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.SetMaxSendMessageSize(64 << 20);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    std::cerr << "sinew-sandbox-agent: cannot listen on " << socket_path << "\n";
    return 1;
  }
  chmod(socket_path.c_str(), 0660);
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  });
  server->Wait();
  stopper.join();
  return 0;
}
