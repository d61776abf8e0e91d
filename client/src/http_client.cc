#include "sinew/client/http_client.h"

namespace sinew::client {

HttpClient::HttpClient(std::string base_url, std::string api_key, std::string ca_file)
    : base_url_(std::move(base_url)), api_key_(std::move(api_key)) {
  while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
  tls_.ca_file = std::move(ca_file);
}

Result<HttpResponse> HttpClient::Send(const std::string& method, const std::string& path,
                                      const std::string& body, const std::string& content_type) {
  http::ClientRequest request;
  request.method = method;
  request.url = base_url_ + path;
  if (!api_key_.empty()) request.headers.push_back("Authorization: Bearer " + api_key_);
  if (method != "GET") {
    request.headers.push_back("Content-Type: " + content_type);
    request.body = body;
  }
  request.timeout_ms = 120000;
  request.max_response_bytes = SIZE_MAX;
  request.tls = tls_;
  auto response = http::Fetch(request);
  if (!response.ok()) {
    return Status::Unavailable("server not reachable at " + base_url_ + " (" + response.status().message() +
                               "); is sinew-harness running? Set --server or SINEW_SERVER");
  }
  return HttpResponse{response->status, std::move(response->body)};
}

Result<long> HttpClient::Stream(const std::string& path, const std::vector<std::string>& extra,
                                const std::function<bool(std::string_view)>& on_data,
                                const std::function<void()>& on_tick,
                                const std::atomic<bool>* stop) {
  http::ClientRequest request;
  request.url = base_url_ + path;
  if (!api_key_.empty()) request.headers.push_back("Authorization: Bearer " + api_key_);
  request.headers.push_back("Accept: text/event-stream");
  for (const auto& h : extra) request.headers.push_back(h);
  request.timeout_ms = 0;
  // The server sends a keepalive comment every ~15 s: 45 s of silence means a dead link.
  request.low_speed_seconds = 45;
  request.stop = stop;
  request.on_tick = on_tick;
  request.tls = tls_;
  auto response = http::Fetch(request, on_data);
  if (!response.ok()) {
    return Status::Unavailable("event stream from " + base_url_ + " broke (" + response.status().message() + ")");
  }
  return response->status;
}

Result<long> HttpClient::PostStream(const std::string& path, const std::string& body,
                                    const std::function<bool(std::string_view)>& on_data) {
  http::ClientRequest request;
  request.method = "POST";
  request.url = base_url_ + path;
  if (!api_key_.empty()) request.headers.push_back("Authorization: Bearer " + api_key_);
  request.headers.push_back("Content-Type: application/json");
  request.headers.push_back("Accept: text/event-stream");
  request.body = body;
  request.timeout_ms = 0;
  request.tls = tls_;
  auto response = http::Fetch(request, on_data);
  if (!response.ok()) {
    return Status::Unavailable("server not reachable at " + base_url_ + " (" + response.status().message() +
                               "); is sinew-harness running? Set --server or SINEW_SERVER");
  }
  return response->status;
}

}  // namespace sinew::client
