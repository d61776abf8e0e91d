#include "http_client.h"

#include <curl/curl.h>

#include <memory>

namespace sinew::cli {
namespace {

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
  ~CurlGlobal() { curl_global_cleanup(); }
};

void EnsureCurl() { static CurlGlobal global; }

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct ListDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

size_t AppendBody(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

struct StreamState {
  const std::function<bool(std::string_view)>* on_data;
  const std::function<void()>* on_tick;
  const std::atomic<bool>* stop = nullptr;
  bool stopped = false;
};

int StreamTick(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* state = static_cast<StreamState*>(user);
  if (*state->on_tick) (*state->on_tick)();
  if (state->stop != nullptr && state->stop->load()) {
    state->stopped = true;
    return 1;  // makes curl abort the transfer
  }
  return 0;
}

size_t StreamBody(char* data, size_t size, size_t n, void* user) {
  auto* state = static_cast<StreamState*>(user);
  if (!(*state->on_data)(std::string_view(data, size * n))) {
    state->stopped = true;
    return 0;  // makes curl abort the transfer
  }
  return size * n;
}

}  // namespace

HttpClient::HttpClient(std::string base_url, std::string api_key)
    : base_url_(std::move(base_url)), api_key_(std::move(api_key)) {
  while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
}

Result<HttpResponse> HttpClient::Send(const std::string& method, const std::string& path,
                                      const std::string& body, const std::string& content_type) {
  EnsureCurl();
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  if (!curl) return Status::Internal("curl_easy_init failed");
  std::unique_ptr<curl_slist, ListDeleter> headers;
  curl_slist* list = nullptr;
  if (!api_key_.empty()) list = curl_slist_append(list, ("Authorization: Bearer " + api_key_).c_str());
  if (method != "GET") list = curl_slist_append(list, ("Content-Type: " + content_type).c_str());
  headers.reset(list);
  HttpResponse resp;
  std::string url = base_url_ + path;
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(curl.get(), CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT_MS, 120000L);
  curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
  if (method != "GET") {
    curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &resp.body);
  CURLcode rc = curl_easy_perform(curl.get());
  if (rc != CURLE_OK) {
    return Status::Unavailable("server not reachable at " + base_url_ + " (" +
                               curl_easy_strerror(rc) +
                               "); is sinew-harness running? Set --server or SINEW_SERVER");
  }
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &resp.status);
  return resp;
}

Result<long> HttpClient::Stream(const std::string& path, const std::vector<std::string>& extra,
                                const std::function<bool(std::string_view)>& on_data,
                                const std::function<void()>& on_tick,
                                const std::atomic<bool>* stop) {
  EnsureCurl();
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  if (!curl) return Status::Internal("curl_easy_init failed");
  curl_slist* list = nullptr;
  if (!api_key_.empty()) list = curl_slist_append(list, ("Authorization: Bearer " + api_key_).c_str());
  list = curl_slist_append(list, "Accept: text/event-stream");
  for (const auto& h : extra) list = curl_slist_append(list, h.c_str());
  std::unique_ptr<curl_slist, ListDeleter> headers(list);
  StreamState state{&on_data, &on_tick, stop};
  std::string url = base_url_ + path;
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(curl.get(), CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  // The server sends a keepalive comment every ~15 s: 45 s of silence means a dead link.
  curl_easy_setopt(curl.get(), CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl.get(), CURLOPT_LOW_SPEED_TIME, 45L);
  curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, StreamBody);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &state);
  curl_easy_setopt(curl.get(), CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl.get(), CURLOPT_XFERINFOFUNCTION, StreamTick);
  curl_easy_setopt(curl.get(), CURLOPT_XFERINFODATA, &state);
  CURLcode rc = curl_easy_perform(curl.get());
  long status = 0;
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &status);
  if (rc != CURLE_OK &&
      !((rc == CURLE_WRITE_ERROR || rc == CURLE_ABORTED_BY_CALLBACK) && state.stopped)) {
    return Status::Unavailable("event stream from " + base_url_ + " broke (" +
                               curl_easy_strerror(rc) + ")");
  }
  return status;
}

}  // namespace sinew::cli
