// What a harness process shares between its REST handlers and its session drivers.
// Everything here is owned by the HarnessImpl and outlives every user of it.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "api_keys.h"
#include "sinew/harness/config.h"
#include "sinew/harness/model_client.h"
#include "sinew/harness/vault.h"
#include "sinew/metrics.h"
#include "sinew/session_store/session_store.h"
#include "tenant_quotas.h"
#include "proxy_tools.h"
#include "sandbox_backend.h"
#include "webhooks.h"

namespace sinew::harness {

struct HarnessDeps {
  const HarnessConfig* config = nullptr;
  store::SessionStore* store = nullptr;
  const Vault* vault = nullptr;
  const std::map<std::string, std::unique_ptr<ModelClient>>* models = nullptr;
  const ProxyTools* proxy = nullptr;
  SandboxBackend* sandboxes = nullptr;
  Metrics* metrics = nullptr;
  ApiKeys* api_keys = nullptr;
  TenantQuotas* quotas = nullptr;
  WebhookState* webhooks = nullptr;
  std::string owner;
  const std::atomic<bool>* stopping = nullptr;
  // Wakes a session (drives it here unless it is driven already): a driver that creates a
  // child session (docs/harness.md, "Sub-agents") starts it at once.
  std::function<void(const std::string&)> wake;
};

}  // namespace sinew::harness
