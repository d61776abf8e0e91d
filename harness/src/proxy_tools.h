// The proxy tools: tools that run in the harness itself, where the secrets are
// (http_request).
//
// Thread-safety: ProxyTools may be used from many threads at once.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "outgoing_http.h"
#include "sinew/harness/config.h"
#include "sinew/harness/vault.h"
#include "tool_catalog.h"

namespace sinew::harness {

// Proxy tools: http_request with a per-host allowlist and credential injection.
class ProxyTools {
 public:
  ProxyTools(std::vector<HttpAllowEntry> allow, const Vault* vault)
      : allow_(std::move(allow)), vault_(vault) {}
  // Runs a proxy tool without holding a thread while its request is out (libcurl's multi
  // interface on the tools' own HTTP thread, started at the first call): `done` gets the
  // outcome there, or at once for input refused before any request; it must be quick and
  // must not block. Failures are outcomes with is_error (for the model). `cancelled`
  // (may be null) stops the request within about a second.
  using Done = std::function<void(ToolOutcome)>;
  void ExecuteAsync(const std::string& name, const std::string& input_json, const std::atomic<bool>* cancelled,
                    Done done) const;
  // Ends the requests still out (their `done` gets a cancelled outcome) and joins the
  // HTTP thread; later calls are answered at once as cancelled. Idempotent.
  void Shutdown();

 private:
  // The request an http_request input asks for (allow list checked, credential added), or
  // the error outcome that refuses it.
  std::variant<HttpRequest, ToolOutcome> HttpRequestFor(const std::string& input_json) const;
  ToolOutcome HttpRequestOutcome(const Result<HttpResponse>& response,
                                 std::chrono::steady_clock::time_point start) const;
  http::AsyncClient& Http() const;
  const std::vector<HttpAllowEntry> allow_;
  const Vault* vault_;  // not owned; outlives this
  mutable std::once_flag http_once_;
  mutable std::unique_ptr<http::AsyncClient> http_;
};

}  // namespace sinew::harness
