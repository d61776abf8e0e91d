#include "curl_http.h"

#include <curl/curl.h>

#include <cctype>
#include <memory>
#include <mutex>

namespace sinew::harness {
namespace {

struct Transfer {
  const HttpRequest* request;
  const ChunkCallback* on_chunk;
  HttpResponse* response;
  bool aborted_by_callback = false;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  std::string_view chunk(data, n);
  if (t->on_chunk != nullptr && *t->on_chunk) {
    if (!(*t->on_chunk)(chunk)) {
      t->aborted_by_callback = true;
      return 0;
    }
    return n;
  }
  const size_t room = t->request->max_response_bytes - std::min(t->request->max_response_bytes,
                                                                t->response->body.size());
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
  if (t->request->cancelled != nullptr && t->request->cancelled->load()) return 1;
  return 0;
}

}  // namespace

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

Result<HttpResponse> PerformHttp(const HttpRequest& request, const ChunkCallback& on_chunk) {
  InitCurlOnce();
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return Status::Internal("curl_easy_init failed");
  HttpResponse response;
  Transfer transfer{&request, &on_chunk, &response};
  CURL* h = curl.get();
  curl_easy_setopt(h, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  if (request.method == "HEAD") curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
      request.method == "PATCH") {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  }
  struct curl_slist* headers = nullptr;
  for (const auto& line : request.headers) headers = curl_slist_append(headers, line.c_str());
  headers = curl_slist_append(headers, "Expect:");
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> header_guard(headers, curl_slist_free_all);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, OnProgress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &transfer);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout_ms));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.connect_timeout_ms));
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  // Proxies from the environment are never used: the harness talks to what it is told.
  curl_easy_setopt(h, CURLOPT_PROXY, "");
  CURLcode rc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response.status);
  if (rc == CURLE_OK) return response;
  const std::string what = request.method + " " + request.url + ": " + curl_easy_strerror(rc);
  if (rc == CURLE_OPERATION_TIMEDOUT) return Status::DeadlineExceeded(what);
  if (rc == CURLE_ABORTED_BY_CALLBACK) return Status::Cancelled(what);
  if (rc == CURLE_WRITE_ERROR && transfer.aborted_by_callback) return Status::Cancelled(what);
  return Status::Unavailable(what);
}

}  // namespace sinew::harness
