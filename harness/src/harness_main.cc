// sinew-harness: the stateless brain. Reads one JSON config file (docs/harness.md),
// serves the REST API and drives sessions until SIGINT/SIGTERM.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "sinew/harness/harness.h"

int main(int argc, char** argv) {
  CLI::App app{"sinew-harness: REST API and agent loop of Sinew"};
  std::string config_path;
  std::string listen;
  std::string store;
  std::string sandboxd;
  std::string log_level = "info";
  app.add_option("--config", config_path, "JSON config file (see docs/harness.md)")->required();
  app.add_option("--listen", listen, "override config.listen (host:port, port 0: any free port)");
  app.add_option("--store", store, "override config.store.address (sinew-store host:port)");
  app.add_option("--sandboxd", sandboxd, "override config.sandboxd.address");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(log_level));
  auto config = sinew::harness::LoadConfig(config_path);
  if (!config.ok()) {
    std::cerr << "sinew-harness: " << config.status().ToString() << "\n";
    return 2;
  }
  if (!listen.empty()) config->listen = listen;
  if (!store.empty()) {
    config->store_address = store;
    config->store_dir.clear();
  }
  if (!sandboxd.empty()) {
    config->sandboxd_address = sandboxd;
    config->sandboxd_etcd.clear();
  }

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto harness = sinew::harness::Harness::Start(*config);
  if (!harness.ok()) {
    std::cerr << "sinew-harness: " << harness.status().ToString() << "\n";
    return 1;
  }
  std::printf("sinew-harness owner %s listening on %s\n", (*harness)->owner().c_str(),
              (*harness)->address().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {}: stopping", sig);
  (*harness)->Stop();
  return 0;
}
