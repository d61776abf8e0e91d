// Test helpers of the harness suites: real sinew-store and sinew-harness processes on
// loopback, a small HTTP client, and an HTTP server inside the test (a test double of
// remote endpoints: model servers speaking the documented wire formats, and the target
// of http_request calls, which counts side effects).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "sinew/testing/subprocess.h"

namespace sinew::harness::test {

struct StoreProcess {
  explicit StoreProcess(const std::string& db_dir);
  std::unique_ptr<testing::Subprocess> proc;
  std::string address;
};

struct HarnessProcess {
  // Writes `config_json` to `config_path` and starts sinew-harness with it.
  HarnessProcess(const std::string& config_path, const std::string& config_json,
                 const std::vector<std::string>& extra_env = {});
  std::unique_ptr<testing::Subprocess> proc;
  std::string address;  // "127.0.0.1:PORT"; empty when it failed to start
  std::string url() const { return "http://" + address; }
};

struct Reply {
  long status = 0;
  std::string body;
  boost::json::value json;  // parsed body (null when not JSON)
  std::vector<std::pair<std::string, std::string>> headers;  // lower-case names
  // The first header called `lower_case_name`, "" if absent.
  std::string Header(const std::string& lower_case_name) const {
    for (const auto& [k, v] : headers) {
      if (k == lower_case_name) return v;
    }
    return "";
  }
};

// The CA that Call() trusts for https:// URLs from now on in this process ("" for the
// system's). Tests of TLS harnesses set it once, before their calls.
void TrustCaFile(const std::string& ca_file);

// One HTTP call to the harness. `headers` are "Name: value" lines.
Reply Call(const std::string& method, const std::string& url, const std::string& body = "",
           std::vector<std::string> headers = {});
// A call with "Authorization: Bearer <key>" and JSON content type.
Reply Api(const std::string& method, const std::string& url, const std::string& key,
          const std::string& body = "");

// Sends `raw` bytes on a fresh connection to 127.0.0.1:`port` and reads until the server
// closes it (or 30 s pass, a bound for the test only: an answer that never ends is the
// defect). Returns what came back ("" if nothing did).
std::string RawHttpExchange(int port, const std::string& raw);
// The first HTTP/1.x response in `raw` (status 0 when there is none); a chunked body is
// decoded, a Content-Length one cut to its length.
Reply ParseHttpReply(const std::string& raw);
// The port of a "host:port" address.
int PortOf(const std::string& address);

// Reads an SSE stream until it ends, `max_events` arrive, or `timeout_ms` passes.
struct SseEvent {
  uint64_t id = 0;
  std::string type;
  std::string data;
};
std::vector<SseEvent> ReadStream(const std::string& url, const std::string& key,
                                 const std::string& last_event_id, size_t max_events,
                                 uint32_t timeout_ms = 60000);
// Writes `script` (the scripted model's file format, harness/src/scripted_model.cc) to
// `path` and appends the config entry of a scripted model `name` reading it to
// `models_json` (the inside of a config's "models" object, entries comma-separated).
void AddScriptedModel(const std::string& name, const std::string& path, const std::string& script,
                      std::string* models_json);

// POSTs JSON `body` with "Accept: text/event-stream" and reads the events of the answer
// until it ends or `timeout_ms` passes, calling `on_event` for each as it arrives. `status`
// gets the HTTP status (0 when none came); an answer that is not a stream has no events.
std::vector<SseEvent> PostForEvents(const std::string& url, const std::string& key, const std::string& body,
                                    const std::function<void(const SseEvent&)>& on_event = {}, long* status = nullptr,
                                    uint32_t timeout_ms = 120000);

// Polls GET /v1/sessions/{id} until its status is one of `statuses` (comma list).
std::string WaitForStatus(const std::string& base, const std::string& key, const std::string& id,
                          const std::string& statuses, int timeout_s = 60);
// Every event of a session as parsed JSON objects, via the events endpoint.
std::vector<boost::json::object> AllEvents(const std::string& base, const std::string& key,
                                           const std::string& id);
// The payloads of the events of `type` ("status_change", "tool_result", ...), in order.
std::vector<boost::json::object> OfType(const std::vector<boost::json::object>& events, const std::string& type);
// The statuses a session went through ("SESSION_STATUS_RUNNING", ...), in order.
std::vector<std::string> Statuses(const std::vector<boost::json::object>& events);

// An HTTP server on 127.0.0.1 in the test process. The handler answers each request.
class TestHttpServer {
 public:
  struct Request {
    std::string method, target, body;
    std::map<std::string, std::string> headers;  // lower-case names
  };
  struct Response {
    int status = 200;
    std::string content_type = "application/json";
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;                 // sent whole, unless chunks is non-empty
    std::vector<std::string> chunks;  // sent one by one (chunked encoding)
    int delay_ms = 0;                 // before answering
    int chunk_delay_ms = 0;           // between chunks
  };
  using Handler = std::function<Response(const Request&)>;
  explicit TestHttpServer(Handler handler);
  ~TestHttpServer();
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<Request> requests();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

std::string WriteFile(const std::string& path, const std::string& content);

// Reads the lines a process has written (--log-format json) until it is quiet for
// `quiet`. A line that is not a JSON object comes back as {"not_json": line}.
std::vector<boost::json::object> ReadJsonLines(testing::Subprocess* proc, std::chrono::milliseconds quiet);
// A string field of a log line, "" when absent.
std::string Str(const boost::json::object& o, const char* key);

// A real sinew-sandboxd for a test, with its own state directory, cgroup parent and
// loopback port. Needs root, runc and the default image (ctest fixture sandbox_image).
class SandboxdProcess {
 public:
  // `extra_args` are added to its command line (e.g. {"--log-format", "json"}); without
  // "--warm-pool-size" it runs with no warm pool.
  explicit SandboxdProcess(const std::vector<std::string>& extra_args = {});
  ~SandboxdProcess();
  std::string address;  // empty when it did not start
  std::string state_dir;
  // Its stdout (the lines it logs).
  testing::Subprocess& proc() { return *proc_; }

 private:
  std::unique_ptr<testing::Subprocess> proc_;
  std::string cgroup_parent_;
};

// The base of the harness's fixtures with real runc sandboxes: a sinew-store and a
// sinew-sandboxd of the test's own (root, runc and the image needed).
class StoreAndSandboxdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_unique<StoreProcess>(dir_.Sub("db"));
    ASSERT_FALSE(store_->address.empty());
    sandboxd_ = std::make_unique<SandboxdProcess>();
    ASSERT_FALSE(sandboxd_->address.empty()) << "sinew-sandboxd did not start (root, runc and the image needed)";
  }

  testing::TempDir dir_;
  std::unique_ptr<StoreProcess> store_;
  std::unique_ptr<SandboxdProcess> sandboxd_;
};


// A sinew-sandboxd that registers in etcd as sandbox host `id` (docs/scale-out.md), with
// its own state directory and cgroup parent, so that several run side by side.
class SandboxHost {
 public:
  // `extra_args` go on its command line (e.g. --etcd-tls-cert ...).
  SandboxHost(std::string id, const std::string& etcd, uint64_t memory_capacity, int ttl_s,
              const std::vector<std::string>& extra_args = {});
  ~SandboxHost();  // SIGTERM; after Kill, a daemon on the same state reaps what it left
  void Kill();     // SIGKILL, no clean shutdown
  void Stop();     // SIGTERM
  const std::string& id() const { return id_; }
  std::string address;  // empty when it did not start

 private:
  std::string id_, state_dir_, cgroup_parent_;
  std::unique_ptr<testing::Subprocess> proc_;
  bool killed_ = false;
};

// A sinew-store that joins the store shard map in etcd as shard `id`; *address is its
// address once it serves ("" when it did not start; `seen` then holds what it printed).
// `extra_args` go on its command line (e.g. --etcd-tls-cert ...).
std::unique_ptr<testing::Subprocess> StartStoreShard(const std::string& db, const std::string& etcd,
                                                     const std::string& id, int grace_ms, std::string* address,
                                                     std::string* seen,
                                                     const std::vector<std::string>& extra_args = {});

// A test double of an OpenAI-compatible model server in its own process
// (harness/tests/model_double.py: two bash calls that count their runs, then an answer;
// each answer after `delay_ms`), so that a test can SIGKILL it for real.
struct ModelDouble {
  std::unique_ptr<testing::Subprocess> proc;
  std::string url;  // http://127.0.0.1:PORT/v1; empty when it did not start
};
ModelDouble StartModelDouble(int delay_ms = 300);

}  // namespace sinew::harness::test
