// http_request: runs in the harness, reaches only allowlisted hosts, and injects the
// host's credential from the vault. The model never sees the credential: the response
// is redacted before it becomes a tool result.

#include <boost/json.hpp>
#include <chrono>

#include "outgoing_http.h"
#include "sinew/http/url.h"
#include "sinew/json_fields.h"
#include "proxy_tools.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;

constexpr size_t kMaxResponseBytes = 64 * 1024;

ToolOutcome Error(std::string message) {
  ToolOutcome o;
  o.is_error = true;
  o.output = std::move(message);
  return o;
}

// Returns "host" and "host:port" (lower case) of an http(s) URL, or an error.
Result<std::pair<std::string, std::string>> HostOf(const std::string& url) {
  auto parts = http::ParseUrl(url);
  if (!parts.ok()) return parts.status();
  if (parts->scheme != "http" && parts->scheme != "https") {
    return Status::InvalidArgument("url scheme must be http or https, not '" + parts->scheme + "'");
  }
  if (!parts->user.empty()) return Status::InvalidArgument("url must not carry user info");
  std::string host = std::move(parts->host);
  for (auto& ch : host) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return std::make_pair(host, host + ":" + parts->port);
}

}  // namespace

void ProxyTools::ExecuteAsync(const std::string& name, const std::string& input_json,
                              const std::atomic<bool>* cancelled, Done done) const {
  if (name != "http_request") return done(Error("unknown proxy tool '" + name + "'"));
  const auto start = std::chrono::steady_clock::now();
  auto request = HttpRequestFor(input_json);
  if (auto* refused = std::get_if<ToolOutcome>(&request)) return done(std::move(*refused));
  HttpRequest req = std::get<HttpRequest>(std::move(request));
  req.stop = cancelled;
  Http().Start(std::move(req), nullptr, [this, start, done = std::move(done)](Result<HttpResponse> response) {
    done(HttpRequestOutcome(CancelledIfStopped(std::move(response), "http_request"), start));
  });
}

http::AsyncClient& ProxyTools::Http() const {
  std::call_once(http_once_, [this] { http_ = std::make_unique<http::AsyncClient>(); });
  return *http_;
}

void ProxyTools::Shutdown() {
  // Started now if it never was, so that the once-flag cannot start one afterwards; the
  // reset below joins its thread, and a stopped client answers later calls as cancelled.
  Http().Stop();
}

std::variant<HttpRequest, ToolOutcome> ProxyTools::HttpRequestFor(const std::string& input_json) const {
  boost::system::error_code ec;
  json::value v = json::parse(input_json, ec);
  if (ec || !v.is_object()) return Error("http_request input must be a JSON object with \"url\"");
  const auto& in = v.as_object();
  HttpRequest req;
  Status read = json_fields::RejectUnknownKeys(in, "method,url,headers,body", "");
  if (read.ok()) read = json_fields::Require(in, "url", "");
  if (read.ok()) read = json_fields::ReadString(in, "url", "", &req.url);
  if (read.ok()) read = json_fields::ReadString(in, "method", "", &req.method);
  if (read.ok()) read = json_fields::ReadString(in, "body", "", &req.body);
  const json::object* headers = nullptr;
  if (read.ok()) read = json_fields::ReadObject(in, "headers", "", &headers);
  if (!read.ok()) return Error("http_request: " + read.message());
  if (req.method != "GET" && req.method != "HEAD" && req.method != "POST" && req.method != "PUT" &&
      req.method != "PATCH" && req.method != "DELETE") {
    return Error("http_request method must be GET, HEAD, POST, PUT, PATCH or DELETE");
  }
  auto host = HostOf(req.url);
  if (!host.ok()) return Error("http_request: " + host.status().message());
  const HttpAllowEntry* entry = nullptr;
  for (const auto& e : allow_) {
    if (e.host == host->first || e.host == host->second) entry = &e;
  }
  if (entry == nullptr) {
    std::string hosts;
    for (const auto& e : allow_) hosts += (hosts.empty() ? "" : ", ") + e.host;
    return Error("http_request: host " + host->second + " is not allowed; allowed hosts: " +
                 (hosts.empty() ? "(none)" : hosts));
  }
  std::string injected_header;
  if (!entry->secret.empty()) {
    auto secret = vault_->Get(entry->secret);
    if (!secret) return Error("http_request: the credential for " + entry->host + " is not configured");
    injected_header = entry->header + ": " + entry->prefix + *secret;
  }
  if (headers != nullptr) {
    for (const auto& kv : *headers) {
      if (!kv.value().is_string()) {
        return Error("http_request: headers." + std::string(kv.key()) + " must be a string");
      }
      std::string name(kv.key());
      if (name.find_first_of(":\r\n") != std::string::npos) return Error("http_request: bad header name");
      std::string value(kv.value().as_string());
      if (value.find_first_of("\r\n") != std::string::npos) return Error("http_request: bad header value");
      if (!injected_header.empty() && strcasecmp(name.c_str(), entry->header.c_str()) == 0) continue;
      req.headers.push_back(name + ": " + value);
    }
  }
  if (!injected_header.empty()) req.headers.push_back(injected_header);
  req.timeout_ms = 30000;
  req.max_response_bytes = kMaxResponseBytes;
  return req;
}

ToolOutcome ProxyTools::HttpRequestOutcome(const Result<HttpResponse>& response,
                                           std::chrono::steady_clock::time_point start) const {
  ToolOutcome out;
  out.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
  if (!response.ok()) {
    out.is_error = true;
    out.output = vault_->Redact("http_request failed: " + response.status().message());
    return out;
  }
  out.exit_status = static_cast<int32_t>(response->status);
  out.truncated = response->truncated;
  out.output = vault_->Redact("HTTP " + std::to_string(response->status) + "\n" + response->body);
  return out;
}

}  // namespace sinew::harness
