// sinew-harness: the stateless brain. Reads one JSON config file (docs/harness.md),
// serves the REST API and drives sessions until SIGINT/SIGTERM.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "sinew/harness/harness.h"
#include "sinew/log.h"

int main(int argc, char** argv) {
  CLI::App app{"sinew-harness: REST API and agent loop of Sinew"};
  std::string config_path;
  std::string listen;
  std::string store;
  std::string sandboxd;
  std::string advertise_url;
  std::string log_level = "info";
  std::string log_format;
  app.add_option("--config", config_path, "JSON config file (see docs/harness.md)")->required();
  app.add_option("--listen", listen, "override config.listen (host:port, port 0: any free port)");
  app.add_option("--store", store, "override config.store.address (sinew-store host:port)");
  app.add_option("--sandboxd", sandboxd, "override config.sandboxd.address");
  app.add_option("--advertise-url", advertise_url,
                 "override config.advertise_url (http(s)://HOST[:PORT] where other harnesses reach this one)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")->capture_default_str();
  app.add_option("--log-format", log_format, "text or json (JSON lines); overrides config.log_format")
      ->check(CLI::IsMember({"text", "json"}));
  CLI11_PARSE(app, argc, argv);
  auto config = sinew::harness::LoadConfig(config_path);
  if (!config.ok()) {
    std::cerr << "sinew-harness: " << config.status().ToString() << "\n";
    return 2;
  }
  if (!log_format.empty()) config->log_format = log_format;
  if (auto logs = sinew::logging::SetupLogging("sinew-harness", config->log_format, log_level); !logs.ok()) {
    std::cerr << "sinew-harness: " << logs.ToString() << "\n";
    return 2;
  }
  if (!listen.empty()) config->listen = listen;
  if (!store.empty()) {
    config->store_address = store;
    config->store_dir.clear();
    config->store_etcd.clear();
  }
  if (!sandboxd.empty()) {
    config->sandboxd_address = sandboxd;
    config->sandboxd_etcd.clear();
  }
  if (!advertise_url.empty()) {
    if (sinew::Status s = sinew::harness::CheckAdvertiseUrl(advertise_url, "--advertise-url"); !s.ok()) {
      std::cerr << "sinew-harness: " << s.ToString() << "\n";
      return 2;
    }
    config->advertise_url = advertise_url;
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
