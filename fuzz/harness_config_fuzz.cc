// Configuration: the harness's config document (harness/src/config.cc: ParseConfig),
// then what a harness builds from a parsed config without touching the network or files:
// the built-in agents again (must be harmless), the vault of secrets and the proxy tools'
// allowlist. A config either fails with a message naming the field or parses.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "sinew/harness/config.h"
#include "sinew/harness/vault.h"
#include "proxy_tools.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto config = sinew::harness::ParseConfig(std::string(sinew::fuzz::Bytes(data, size)));
  if (!config.ok()) {
    if (config.status().message().empty()) sinew::fuzz::Violated("a refused config has no message");
    return 0;
  }
  if (!sinew::harness::AddBuiltinAgents(&*config).ok()) sinew::fuzz::Violated("adding the built-in agents twice failed");
  auto vault = sinew::harness::Vault::Create(config->secrets);
  sinew::harness::ProxyTools proxy(config->http_allow, vault.get());
  (void)proxy;
  return 0;
}
