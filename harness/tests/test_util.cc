#include "test_util.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <chrono>
#include <fstream>
#include <filesystem>
#include <csignal>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sinew/sandbox/provisioner_client.h"

#include "outgoing_http.h"
#include "sinew/http/server.h"

namespace sinew::harness::test {

namespace json = boost::json;

StoreProcess::StoreProcess(const std::string& db_dir) {
  proc = std::make_unique<testing::Subprocess>(std::vector<std::string>{
      testing::BinaryPath("sinew-store"), "--db", db_dir, "--listen", "127.0.0.1:0"});
  auto line = proc->WaitForLine("listening on", std::chrono::seconds(30));
  if (line) address = line->substr(line->rfind(' ') + 1);
}

HarnessProcess::HarnessProcess(const std::string& config_path, const std::string& config_json,
                               const std::vector<std::string>& extra_env) {
  WriteFile(config_path, config_json);
  proc = std::make_unique<testing::Subprocess>(
      std::vector<std::string>{testing::BinaryPath("sinew-harness"), "--config", config_path}, extra_env);
  auto line = proc->WaitForLine("listening on", std::chrono::seconds(30));
  if (line) address = line->substr(line->rfind(' ') + 1);
}

namespace {

// Removes a test daemon's state directory and its (empty) parent cgroups.
void RemoveSandboxdState(const std::string& state_dir, const std::string& cgroup_parent) {
  std::error_code ec;
  std::filesystem::remove_all(state_dir, ec);
  for (const auto& h : std::filesystem::directory_iterator("/sys/fs/cgroup", ec)) {
    std::filesystem::path p = h.path() / cgroup_parent;
    if (std::filesystem::exists(p, ec)) ::rmdir(p.c_str());
  }
  ::rmdir(("/sys/fs/cgroup/" + cgroup_parent).c_str());
}

}  // namespace

SandboxdProcess::SandboxdProcess(const std::vector<std::string>& extra_args) {
  const std::string tag = std::to_string(::getpid());
  state_dir = "/run/sinew-harness-test-" + tag;
  cgroup_parent_ = "sinew-harness-test-" + tag;
  const std::string addr = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  std::vector<std::string> argv{testing::BinaryPath("sinew-sandboxd"), "--listen", addr, "--state-dir", state_dir,
                                "--cgroup-parent", cgroup_parent_};
  // No warm pool unless the caller asks for one.
  if (std::find(extra_args.begin(), extra_args.end(), "--warm-pool-size") == extra_args.end()) {
    argv.insert(argv.end(), {"--warm-pool-size", "0"});
  }
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  proc_ = std::make_unique<testing::Subprocess>(argv);
  auto client = sandbox::ProvisionerClient::Connect(addr, std::chrono::seconds(10));
  if (!client.ok()) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < until) {
    if ((*client)->Health().ok()) {
      address = addr;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

SandboxdProcess::~SandboxdProcess() {
  proc_->Signal(SIGTERM);
  proc_->Wait();
  RemoveSandboxdState(state_dir, cgroup_parent_);
}

std::string WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path);
  out << content;
  return path;
}

namespace {
std::mutex g_ca_mutex;
std::string g_ca_file;
}  // namespace

void TrustCaFile(const std::string& ca_file) {
  std::lock_guard<std::mutex> lock(g_ca_mutex);
  g_ca_file = ca_file;
}

Reply Call(const std::string& method, const std::string& url, const std::string& body,
           std::vector<std::string> headers) {
  HttpRequest req;
  {
    std::lock_guard<std::mutex> lock(g_ca_mutex);
    req.tls.ca_file = g_ca_file;
  }
  req.method = method;
  req.url = url;
  req.body = body;
  req.headers = std::move(headers);
  req.timeout_ms = 30000;
  Reply reply;
  auto resp = PerformHttp(req);
  if (!resp.ok()) {
    reply.body = resp.status().ToString();
    return reply;
  }
  reply.status = resp->status;
  reply.body = resp->body;
  reply.headers = resp->headers;
  boost::system::error_code ec;
  reply.json = json::parse(reply.body, ec);
  if (ec) reply.json = nullptr;
  return reply;
}

std::string RawHttpExchange(int port, const std::string& raw) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "";
  }
  (void)::send(fd, raw.data(), raw.size(), MSG_NOSIGNAL);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string out;
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Reply ParseHttpReply(const std::string& raw) {
  Reply reply;
  const size_t head_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos || raw.size() < 12) return reply;
  reply.status = std::strtol(raw.substr(9, 3).c_str(), nullptr, 10);
  size_t line_start = raw.find("\r\n") + 2;
  while (line_start < head_end) {
    const size_t line_end = raw.find("\r\n", line_start);
    const std::string line = raw.substr(line_start, line_end - line_start);
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const size_t value = line.find_first_not_of(' ', colon + 1);
      reply.headers.emplace_back(name, value == std::string::npos ? "" : line.substr(value));
    }
    line_start = line_end + 2;
  }
  std::string body = raw.substr(head_end + 4);
  if (reply.Header("transfer-encoding") == "chunked") {
    std::string decoded;
    size_t at = 0;
    while (at < body.size()) {
      const size_t size_end = body.find("\r\n", at);
      if (size_end == std::string::npos) break;
      const size_t n = std::strtoul(body.substr(at, size_end - at).c_str(), nullptr, 16);
      if (n == 0) break;
      decoded += body.substr(size_end + 2, n);
      at = size_end + 2 + n + 2;
    }
    body = std::move(decoded);
  } else if (const std::string length = reply.Header("content-length"); !length.empty()) {
    body = body.substr(0, std::strtoul(length.c_str(), nullptr, 10));
  }
  reply.body = std::move(body);
  boost::system::error_code ec;
  reply.json = json::parse(reply.body, ec);
  if (ec) reply.json = nullptr;
  return reply;
}

int PortOf(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

Reply Api(const std::string& method, const std::string& url, const std::string& key, const std::string& body) {
  return Call(method, url, body, {"Authorization: Bearer " + key, "Content-Type: application/json"});
}

namespace {

// The events of a text/event-stream body as its chunks arrive: `on_event` for each
// complete one, which returns false to stop reading.
class SseLines {
 public:
  explicit SseLines(std::function<bool(const SseEvent&)> on_event) : on_event_(std::move(on_event)) {}
  bool Feed(std::string_view chunk) {
    pending_.append(chunk);
    size_t nl;
    while ((nl = pending_.find('\n')) != std::string::npos) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      if (line.empty()) {
        SseEvent done = std::move(current_);
        current_ = SseEvent();
        if (!done.type.empty() && !on_event_(done)) return false;
      } else if (line.rfind("id: ", 0) == 0) {
        current_.id = std::stoull(line.substr(4));
      } else if (line.rfind("event: ", 0) == 0) {
        current_.type = line.substr(7);
      } else if (line.rfind("data: ", 0) == 0) {
        current_.data = line.substr(6);
      }
    }
    return true;
  }

 private:
  std::function<bool(const SseEvent&)> on_event_;
  std::string pending_;
  SseEvent current_;  // our SseParser drops the id field: the lines are read here
};

}  // namespace

std::vector<SseEvent> ReadStream(const std::string& url, const std::string& key,
                                 const std::string& last_event_id, size_t max_events, uint32_t timeout_ms) {
  std::vector<SseEvent> events;
  HttpRequest req;
  req.url = url;
  req.headers = {"Authorization: Bearer " + key, "Accept: text/event-stream"};
  if (!last_event_id.empty()) req.headers.push_back("Last-Event-ID: " + last_event_id);
  req.timeout_ms = timeout_ms;
  SseLines lines([&](const SseEvent& e) {
    events.push_back(e);
    return events.size() < max_events;
  });
  auto resp = PerformHttp(req, [&](std::string_view chunk) { return lines.Feed(chunk); });
  (void)resp;
  return events;
}

std::vector<SseEvent> PostForEvents(const std::string& url, const std::string& key, const std::string& body,
                                    const std::function<void(const SseEvent&)>& on_event, long* status,
                                    uint32_t timeout_ms) {
  std::vector<SseEvent> events;
  HttpRequest req;
  req.method = "POST";
  req.url = url;
  req.body = body;
  req.headers = {"Authorization: Bearer " + key, "Content-Type: application/json", "Accept: text/event-stream"};
  req.timeout_ms = timeout_ms;
  SseLines lines([&](const SseEvent& e) {
    events.push_back(e);
    if (on_event) on_event(e);
    return true;
  });
  auto resp = PerformHttp(req, [&](std::string_view chunk) { return lines.Feed(chunk); });
  if (status != nullptr) *status = resp.ok() ? resp->status : 0;
  return events;
}

void AddScriptedModel(const std::string& name, const std::string& path, const std::string& script,
                      std::string* models_json) {
  WriteFile(path, script);
  *models_json += std::string(models_json->empty() ? "" : ", ") + "\"" + name +
                  "\": {\"kind\": \"scripted\", \"script\": \"" + path + "\"}";
}

std::string WaitForStatus(const std::string& base, const std::string& key, const std::string& id,
                          const std::string& statuses, int timeout_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::string status;
  while (std::chrono::steady_clock::now() < until) {
    auto r = Api("GET", base + "/v1/sessions/" + id, key);
    if (r.status == 200) {
      status = std::string(r.json.at("session").at("status").as_string());
      if (("," + statuses + ",").find("," + status + ",") != std::string::npos) return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "timeout (last: " + status + ")";
}

std::vector<json::object> AllEvents(const std::string& base, const std::string& key, const std::string& id) {
  std::vector<json::object> out;
  uint64_t after = 0;
  while (true) {
    auto r = Api("GET", base + "/v1/sessions/" + id + "/events?after=" + std::to_string(after) + "&limit=1000", key);
    if (r.status != 200) break;
    const auto& events = r.json.at("events").as_array();
    if (events.empty()) break;
    for (const auto& e : events) out.push_back(e.as_object());
    after = std::stoull(std::string(out.back().at("seq").as_string()));
  }
  return out;
}

// The test double runs on the product's HTTP server (sinew/http/server.h); each request
// is answered on its own thread, so handlers and their delays may block.
struct TestHttpServer::Impl {
  Handler handler;
  std::unique_ptr<sinew::http::Server> server;
  std::mutex mutex;
  std::condition_variable idle;
  std::vector<Request> requests;  // guarded by mutex
  int running = 0;                // guarded by mutex

  void Answer(const Request& r, const std::shared_ptr<sinew::http::ResponseStream>& stream) {
    Response resp = handler(r);
    if (resp.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(resp.delay_ms));
    if (resp.chunks.empty() || resp.status != 200) {
      std::string body = resp.body;
      for (const auto& c : resp.chunks) body += c;
      stream->Send(sinew::http::Response{resp.status, resp.content_type, std::move(body), resp.headers});
      return;
    }
    auto headers = resp.headers;
    headers.emplace_back("Content-Type", resp.content_type);
    if (!stream->StartEvents(headers)) return;
    for (const auto& c : resp.chunks) {
      if (resp.chunk_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(resp.chunk_delay_ms));
      if (!stream->SendEvent(c)) return;
    }
    stream->EndEvents();
  }
};

TestHttpServer::TestHttpServer(Handler handler) : impl_(std::make_unique<Impl>()) {
  impl_->handler = std::move(handler);
  sinew::http::ServerOptions options;
  options.max_body_bytes = 256u << 20;
  options.server_name = "sinew-test-double";
  Impl* impl = impl_.get();
  auto server = sinew::http::Server::Start(options, [impl](sinew::http::Request in,
                                                           std::shared_ptr<sinew::http::ResponseStream> stream) {
    Request r;
    r.method = std::move(in.method);
    r.target = std::move(in.target);
    r.body = std::move(in.body);
    for (auto& [name, value] : in.headers) r.headers[name] = value;
    {
      std::lock_guard<std::mutex> lock(impl->mutex);
      impl->requests.push_back(r);
      ++impl->running;
    }
    std::thread([impl, r = std::move(r), stream = std::move(stream)]() mutable {
      impl->Answer(r, stream);
      stream.reset();
      std::lock_guard<std::mutex> lock(impl->mutex);
      if (--impl->running == 0) impl->idle.notify_all();
    }).detach();
  });
  if (!server.ok()) throw std::runtime_error("test HTTP server: " + server.status().ToString());
  impl_->server = std::move(*server);
  port_ = impl_->server->port();
}

TestHttpServer::~TestHttpServer() {
  impl_->server->Stop();
  std::unique_lock<std::mutex> lock(impl_->mutex);
  impl_->idle.wait(lock, [&] { return impl_->running == 0; });
}

std::vector<TestHttpServer::Request> TestHttpServer::requests() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->requests;
}

std::vector<boost::json::object> ReadJsonLines(testing::Subprocess* proc, std::chrono::milliseconds quiet) {
  std::vector<boost::json::object> lines;
  while (auto line = proc->ReadLine(quiet)) {
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(*line, ec);
    if (ec || !v.is_object()) {
      lines.push_back(boost::json::object{{"not_json", *line}});
      continue;
    }
    lines.push_back(v.as_object());
  }
  return lines;
}

std::vector<boost::json::object> OfType(const std::vector<boost::json::object>& events, const std::string& type) {
  std::vector<boost::json::object> out;
  for (const auto& e : events) {
    if (Str(e, "type") == type) out.push_back(e.at(type).as_object());
  }
  return out;
}

std::vector<std::string> Statuses(const std::vector<boost::json::object>& events) {
  std::vector<std::string> out;
  for (const auto& s : OfType(events, "status_change")) out.push_back(Str(s, "to"));
  return out;
}

std::string Str(const boost::json::object& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->value().is_string() ? std::string(it->value().as_string()) : "";
}

SandboxHost::SandboxHost(std::string id, const std::string& etcd, uint64_t memory_capacity, int ttl_s,
                         const std::vector<std::string>& extra_args)
    : id_(std::move(id)) {
  const std::string tag = std::to_string(::getpid()) + "-" + id_;
  state_dir_ = "/run/sinew-scale-test-" + tag;
  cgroup_parent_ = "sinew-scale-test-" + tag;
  const std::string addr = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  std::vector<std::string> args = {
      testing::BinaryPath("sinew-sandboxd"), "--listen", addr, "--state-dir", state_dir_, "--cgroup-parent",
      cgroup_parent_, "--warm-pool-size", "0", "--etcd", etcd, "--advertise", addr, "--host-id", id_,
      "--etcd-ttl", std::to_string(ttl_s), "--capacity-memory-bytes", std::to_string(memory_capacity)};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  proc_ = std::make_unique<testing::Subprocess>(args);
  if (proc_->WaitForLine("listening on", std::chrono::seconds(60))) address = addr;
}

SandboxHost::~SandboxHost() {
  if (proc_ && proc_->running()) {
    proc_->Signal(SIGTERM);
    proc_->Wait();
  }
  if (killed_) {
    // Its sandboxes outlived it: a new daemon on the same state reaps them on start.
    testing::Subprocess reaper({testing::BinaryPath("sinew-sandboxd"), "--listen",
                                "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort()), "--state-dir", state_dir_,
                                "--cgroup-parent", cgroup_parent_, "--warm-pool-size", "0"});
    (void)reaper.WaitForLine("listening on", std::chrono::seconds(60));
    reaper.Signal(SIGTERM);
    reaper.Wait();
  }
  RemoveSandboxdState(state_dir_, cgroup_parent_);
}

void SandboxHost::Kill() {
  proc_->Signal(SIGKILL);
  proc_->Wait();
  killed_ = true;
}

void SandboxHost::Stop() {
  proc_->Signal(SIGTERM);
  proc_->Wait();
}

std::unique_ptr<testing::Subprocess> StartStoreShard(const std::string& db, const std::string& etcd,
                                                     const std::string& id, int grace_ms, std::string* address,
                                                     std::string* seen, const std::vector<std::string>& extra_args) {
  std::vector<std::string> args = {testing::BinaryPath("sinew-store"), "--db", db, "--listen", "127.0.0.1:0",
                                   "--etcd", etcd, "--shard-id", id, "--shard-grace-ms", std::to_string(grace_ms)};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  auto proc = std::make_unique<testing::Subprocess>(args);
  while (auto line = proc->ReadLine(std::chrono::seconds(30))) {
    if (line->find("listening on") != std::string::npos) {
      *address = line->substr(line->rfind(' ') + 1);
      return proc;
    }
    *seen += *line + "\n";
  }
  return proc;
}

ModelDouble StartModelDouble(int delay_ms) {
  ModelDouble m;
  m.proc = std::make_unique<testing::Subprocess>(std::vector<std::string>{
      "/usr/bin/python3", std::string(SINEW_SOURCE_ROOT) + "/harness/tests/model_double.py", "0",
      std::to_string(delay_ms)});
  if (auto line = m.proc->WaitForLine("listening on", std::chrono::seconds(30))) {
    m.url = "http://" + line->substr(line->rfind(' ') + 1) + "/v1";
  }
  return m;
}

}  // namespace sinew::harness::test
