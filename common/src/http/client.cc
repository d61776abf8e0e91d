#include "sinew/http/client.h"

#include <curl/curl.h>

#include <cctype>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace sinew::http {
namespace {

struct Transfer {
  const ClientRequest* request;
  const ChunkCallback* on_chunk;
  ClientResponse* response;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  if (t->on_chunk != nullptr && *t->on_chunk) {
    if (!(*t->on_chunk)(std::string_view(data, n))) {
      t->response->stopped = true;
      return 0;  // makes curl abort the transfer
    }
    return n;
  }
  const size_t limit = t->request->max_response_bytes;
  const size_t room = limit - std::min(limit, t->response->body.size());
  if (n > room) {
    t->response->body.append(data, room);
    t->response->truncated = true;
    return n;
  }
  t->response->body.append(data, n);
  return n;
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view line(data, size * count);
  if (line.starts_with("HTTP/")) t->response->headers.clear();  // a new response head (after 100 Continue)
  auto colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name(line.substr(0, colon));
    for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n')) value.remove_suffix(1);
    t->response->headers.emplace_back(std::move(name), std::string(value));
  }
  return size * count;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (t->request->on_tick) t->request->on_tick();
  if (t->request->stop != nullptr && t->request->stop->load()) {
    t->response->stopped = true;
    return 1;  // makes curl abort the transfer
  }
  return 0;
}

void SetTls(CURL* h, const ClientTls& tls) {
  if (!tls.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, tls.ca_file.c_str());
  if (!tls.cert_file.empty()) curl_easy_setopt(h, CURLOPT_SSLCERT, tls.cert_file.c_str());
  if (!tls.key_file.empty()) curl_easy_setopt(h, CURLOPT_SSLKEY, tls.key_file.c_str());
  curl_easy_setopt(h, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
}

}  // namespace

std::string_view ClientResponse::Header(std::string_view lower_case_name) const {
  for (const auto& [name, value] : headers)
    if (name == lower_case_name) return value;
  return {};
}

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

namespace {

// One request's easy handle and everything its callbacks use; lives at a fixed address
// (the callbacks hold pointers into it) until the transfer ends.
class Easy {
 public:
  Easy(ClientRequest request, ChunkCallback on_chunk)
      : request_(std::move(request)), on_chunk_(std::move(on_chunk)), transfer_{&request_, &on_chunk_, &response_} {}
  ~Easy() {
    if (handle_ != nullptr) curl_easy_cleanup(handle_);
    if (headers_ != nullptr) curl_slist_free_all(headers_);
    if (resolve_ != nullptr) curl_slist_free_all(resolve_);
  }
  Easy(const Easy&) = delete;
  Easy& operator=(const Easy&) = delete;

  // The configured handle, or null when libcurl could not make one.
  CURL* Setup() {
    InitCurlOnce();
    handle_ = curl_easy_init();
    if (handle_ == nullptr) return nullptr;
    CURL* h = handle_;
    curl_easy_setopt(h, CURLOPT_URL, request_.url.c_str());
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, request_.method.c_str());
    if (request_.method == "HEAD") curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    if (!request_.body.empty() || request_.method == "POST" || request_.method == "PUT" ||
        request_.method == "PATCH") {
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, request_.body.data());
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request_.body.size()));
    }
    for (const auto& line : request_.headers) headers_ = curl_slist_append(headers_, line.c_str());
    headers_ = curl_slist_append(headers_, "Expect:");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers_);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &transfer_);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &transfer_);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, OnProgress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &transfer_);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(request_.timeout_ms));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request_.connect_timeout_ms));
    if (request_.low_speed_seconds > 0) {
      curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
      curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(request_.low_speed_seconds));
    }
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    // Proxies from the environment are never used: Sinew talks to what it is told.
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    SetTls(h, request_.tls);
    for (const auto& entry : request_.resolve) resolve_ = curl_slist_append(resolve_, entry.c_str());
    if (resolve_ != nullptr) curl_easy_setopt(h, CURLOPT_RESOLVE, resolve_);
    return h;
  }

  // What the transfer came to, given libcurl's result for it.
  Result<ClientResponse> Finish(CURLcode rc) {
    curl_easy_getinfo(handle_, CURLINFO_RESPONSE_CODE, &response_.status);
    if (rc == CURLE_OK || response_.stopped) return std::move(response_);
    const std::string what = request_.method + " " + request_.url + ": " + curl_easy_strerror(rc);
    if (rc == CURLE_OPERATION_TIMEDOUT) return Status::DeadlineExceeded(what);
    return Status::Unavailable(what);
  }

 private:
  const ClientRequest request_;
  const ChunkCallback on_chunk_;
  ClientResponse response_;
  Transfer transfer_;
  CURL* handle_ = nullptr;
  curl_slist* headers_ = nullptr;
  curl_slist* resolve_ = nullptr;
};

}  // namespace

Result<ClientResponse> Fetch(const ClientRequest& request, const ChunkCallback& on_chunk) {
  Easy easy(request, on_chunk);
  CURL* h = easy.Setup();
  if (h == nullptr) return Status::Internal("curl_easy_init failed");
  return easy.Finish(curl_easy_perform(h));
}

struct AsyncClient::Impl {
  struct Running {
    std::unique_ptr<Easy> easy;
    Done done;
  };

  Impl() : multi((InitCurlOnce(), curl_multi_init())) {
    thread = std::thread([this] { Loop(); });
  }
  ~Impl() {
    Stop();
    curl_multi_cleanup(multi);
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
    }
    curl_multi_wakeup(multi);
    std::lock_guard<std::mutex> lock(join_mu);
    if (thread.joinable()) thread.join();
  }

  void Loop() {
    std::map<CURL*, Running> running;  // the loop thread's own
    for (;;) {
      std::vector<Running> added;
      bool stop = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        added.swap(pending);
        stop = stopping;
      }
      for (auto& r : added) {
        CURL* h = r.easy->Setup();
        if (h == nullptr || curl_multi_add_handle(multi, h) != CURLM_OK) {
          r.done(Status::Internal("libcurl could not start the transfer"));
          continue;
        }
        running.emplace(h, std::move(r));
      }
      if (stop) break;
      int still = 0;
      curl_multi_perform(multi, &still);
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
        if (msg->msg != CURLMSG_DONE) continue;
        auto it = running.find(msg->easy_handle);
        if (it == running.end()) continue;
        curl_multi_remove_handle(multi, msg->easy_handle);
        Running done = std::move(it->second);
        running.erase(it);
        done.done(done.easy->Finish(msg->data.result));
      }
      // Wakes for the sockets, for Start and the destructor (curl_multi_wakeup), and at
      // least once a second so that progress callbacks see `stop`.
      curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
    }
    for (auto& [h, r] : running) {
      curl_multi_remove_handle(multi, h);
      r.done(Status::Cancelled("the HTTP client was shut down"));
    }
  }

  CURLM* const multi;
  std::mutex mu;
  std::vector<Running> pending;  // guarded by mu
  bool stopping = false;         // guarded by mu
  std::mutex join_mu;            // one Stop joins the thread
  std::thread thread;
};

AsyncClient::AsyncClient() : impl_(std::make_unique<Impl>()) {}
AsyncClient::~AsyncClient() = default;

void AsyncClient::Stop() { impl_->Stop(); }

void AsyncClient::Start(ClientRequest request, ChunkCallback on_chunk, Done done) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (!impl_->stopping) {
      impl_->pending.push_back({std::make_unique<Easy>(std::move(request), std::move(on_chunk)), std::move(done)});
      done = nullptr;
    }
  }
  if (done) return done(Status::Cancelled("the HTTP client was shut down"));
  curl_multi_wakeup(impl_->multi);
}

}  // namespace sinew::http
