// One harness holding 10,000 sessions at once (issue 17): a real sinew-store and
// sinew-harness process, and the scripted model (a test double of a language model) whose
// first answer to every session waits for a gate file. The test creates every session,
// waits until the harness drives all of them at once (each waiting on the model), samples
// its memory and threads, opens the gate, and then every session makes one http_request
// tool call and ends its turn. The harness must hold them all as coroutines (not a thread
// each), complete every one, and say what a session costs in memory.
// SINEW_SCALE_SESSIONS overrides the count (10,000).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <cstdio>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <atomic>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

#include "test_util.h"

namespace sinew::harness::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kKey[] = "scale-key";

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

// A field of /proc/PID/status ("VmRSS" in KiB, "Threads"); -1 when unreadable.
long ProcStatus(int pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::atol(line.c_str() + field.size() + 1);
  }
  return -1;
}

// True once every thread of process `pid` is stopped (state T in /proc/PID/task/*/stat):
// kill(SIGSTOP) returns before the threads have stopped, and a request that reaches the
// process meanwhile is still answered. False if that takes longer than 5 s.
bool WaitUntilStopped(int pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (int i = 0; i < 500; ++i) {
    bool all = true;
    for (const auto& task : std::filesystem::directory_iterator(tasks)) {
      std::ifstream in(task.path() / "stat");
      std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const size_t paren = stat.rfind(')');  // the state follows the command's ") "
      all = all && paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'T';
    }
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The value of an unlabelled metric in a Prometheus text page; -1 when absent.
double Metric(const std::string& page, const std::string& name) {
  const auto at = page.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::atof(page.c_str() + at + name.size() + 2);
}

// A meeting point for the requests a test server holds: each Arrive waits until
// `expected` have arrived (or 30 s passed) and returns how many had arrived by then.
class Gathering {
 public:
  explicit Gathering(int expected) : expected_(expected) {}
  int Arrive() {
    std::unique_lock<std::mutex> lock(mu_);
    ++arrived_;
    all_there_.notify_all();
    all_there_.wait_for(lock, std::chrono::seconds(30), [&] { return arrived_ >= expected_; });
    return arrived_;
  }
  int arrived() {
    std::lock_guard<std::mutex> lock(mu_);
    return arrived_;
  }

 private:
  const int expected_;
  std::mutex mu_;
  std::condition_variable all_there_;
  int arrived_ = 0;  // guarded by mu_
};

// Ids of every session with `status`, paging through the listing.
std::set<std::string> SessionsWith(const std::string& base, const std::string& status) {
  std::set<std::string> ids;
  std::string token;
  for (int page = 0; page < 100; ++page) {
    auto r = Api("GET", base + "/v1/sessions?status=" + status + "&limit=1000" +
                            (token.empty() ? "" : "&page_token=" + token), kKey);
    if (r.status != 200) break;
    for (const auto& s : r.json.at("sessions").as_array()) ids.insert(std::string(s.at("id").as_string()));
    token = std::string(r.json.at("next_page_token").as_string());
    if (token.empty()) break;
  }
  return ids;
}

TEST(HarnessScaleTest, TenThousandConcurrentSessionsAllCompleteWithoutAThreadEach) {
  const int sessions = EnvInt("SINEW_SCALE_SESSIONS", 10000);
  testing::TempDir dir("sinew-scale");
  StoreProcess store(dir.Sub("db"));
  ASSERT_FALSE(store.address.empty());
  std::atomic<int> tool_calls{0};
  TestHttpServer target([&](const TestHttpServer::Request&) {
    ++tool_calls;
    TestHttpServer::Response r;
    r.content_type = "text/plain";
    r.body = "ok";
    return r;
  });
  WriteFile(dir.Sub("script.json"), R"({"responses": [
    {"text": "looking", "wait_for_file": ")" + dir.Sub("gate") + R"(",
     "tool_calls": [{"name": "http_request", "input": {"url": ")" + target.url() + R"(/{{session_id}}"}}]},
    {"text": "done"}]})");
  HarnessProcess harness(dir.Sub("harness.json"), R"({"listen": "127.0.0.1:0",
    "store": {"address": ")" + store.address + R"("}, "api_keys": {")" + kKey + R"(": "scale"},
    "default_model": "scripted", "models": {"scripted": {"kind": "scripted", "script": ")" +
                                                       dir.Sub("script.json") + R"("}},
    "http_request": {"allow": [{"host": "127.0.0.1:)" + std::to_string(target.port()) + R"("}]},
    "lease_ttl_ms": 60000, "scan_interval_ms": 60000, "max_connections": 4096})");
  ASSERT_FALSE(harness.address.empty());
  const int pid = harness.proc->pid();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const long base_kb = ProcStatus(pid, "VmRSS");
  const long base_threads = ProcStatus(pid, "Threads");

  // Created from 8 client threads; every session then waits on its first model call.
  const auto start = Clock::now();
  std::atomic<int> next{0}, created{0}, refused{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&] {
      while (next++ < sessions) {
        auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "work"})");
        (r.status == 201 ? created : refused)++;
      }
    });
  }
  for (auto& t : clients) t.join();
  const double create_s = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_EQ(created.load(), sessions) << refused.load() << " creations refused";

  // Every session is driven at once, each waiting on the model behind the gate.
  double driven = 0;
  long peak_kb = base_kb, peak_threads = base_threads;
  auto sample = [&] {
    peak_kb = std::max(peak_kb, ProcStatus(pid, "VmRSS"));
    peak_threads = std::max(peak_threads, ProcStatus(pid, "Threads"));
  };
  for (int i = 0; i < 600 && driven < sessions; ++i) {
    sample();
    auto m = Call("GET", harness.url() + "/metrics");
    if (m.status == 200) driven = Metric(m.body, "sinew_harness_sessions_driven");
    if (driven < sessions) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  sample();
  const long held_kb = ProcStatus(pid, "VmRSS");
  const long held_threads = ProcStatus(pid, "Threads");
  ASSERT_EQ(driven, sessions) << "the harness never drove every session at once";

  // Open the gate; sample until every session has ended.
  WriteFile(dir.Sub("gate"), "open");
  std::set<std::string> completed;
  for (int i = 0; i < 1200 && static_cast<int>(completed.size()) < sessions; ++i) {
    sample();
    completed = SessionsWith(harness.url(), "completed");
    if (static_cast<int>(completed.size()) < sessions) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  const double wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  const double kib_held = static_cast<double>(held_kb - base_kb) / sessions;
  const double kib_peak = static_cast<double>(peak_kb - base_kb) / sessions;
  std::printf("%d sessions: created in %.1f s, all ended %.1f s after the first POST\n"
              "  harness RSS %.1f MiB idle, %.1f MiB with all %d waiting (%.1f KiB per session), %.1f MiB peak "
              "(%.1f KiB per session)\n  threads %ld idle, %ld with all waiting, %ld peak\n",
              sessions, create_s, wall_s, base_kb / 1024.0, held_kb / 1024.0, sessions, kib_held, peak_kb / 1024.0,
              kib_peak, base_threads, held_threads, peak_threads);
  ::testing::Test::RecordProperty("kib_per_waiting_session", std::to_string(kib_held));
  ::testing::Test::RecordProperty("kib_per_session_peak", std::to_string(kib_peak));
  ::testing::Test::RecordProperty("peak_threads", std::to_string(peak_threads));

  EXPECT_EQ(static_cast<int>(completed.size()), sessions);
  EXPECT_EQ(tool_calls.load(), sessions);  // each session's one tool call ran once
  // Held without a thread each: driver threads, the store and blocking pools, gRPC, HTTP.
  EXPECT_LT(held_threads, 1000);
  EXPECT_LT(peak_threads, 1000);
  // A spot check of one session's log: created, asked, called, answered, completed.
  const std::string one = *completed.begin();
  auto events = AllEvents(harness.url(), kKey, one);
  int tool_results = 0, responses = 0;
  for (const auto& e : events) {
    tool_results += e.contains("tool_result") ? 1 : 0;
    responses += e.contains("model_response") ? 1 : 0;
  }
  EXPECT_EQ(tool_results, 1);
  EXPECT_EQ(responses, 2);
  EXPECT_EQ(events.back().at("status_change").at("to").as_string(), "SESSION_STATUS_COMPLETED");
}

// Opens GET /v1/sessions/{id}/events/stream on a socket of its own; -1 on failure.
int OpenStream(uint16_t port, const std::string& id) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{120, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string request = "GET /v1/sessions/" + id + "/events/stream HTTP/1.1\r\nHost: x\r\n" +
                              "Authorization: Bearer " + kKey + "\r\n\r\n";
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads from `fd` into *seen until it holds `want` (true) or the socket ends or times out.
bool ReadUntil(int fd, std::string* seen, const std::string& want) {
  char buf[16384];
  while (seen->find(want) == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    seen->append(buf, static_cast<size_t>(n));
  }
  return true;
}

// Event streams are coroutines too (issue 17): 400 clients following 8 sessions that wait
// on the model hold no thread each (before: a request thread and a store watch thread per
// stream), and every one of them sees its session's end.
TEST(HarnessScaleTest, FollowedEventStreamsHoldNoThreadWhileTheyWait) {
  constexpr int kSessions = 8, kStreams = 400;
  testing::TempDir dir("sinew-streams");
  StoreProcess store(dir.Sub("db"));
  ASSERT_FALSE(store.address.empty());
  WriteFile(dir.Sub("script.json"), R"({"responses": [
    {"text": "done", "wait_for_file": ")" + dir.Sub("gate") + R"("}]})");
  HarnessProcess harness(dir.Sub("harness.json"), R"({"listen": "127.0.0.1:0",
    "store": {"address": ")" + store.address + R"("}, "api_keys": {")" + kKey + R"(": "scale"},
    "default_model": "scripted", "models": {"scripted": {"kind": "scripted", "script": ")" +
                                                       dir.Sub("script.json") + R"("}},
    "lease_ttl_ms": 60000, "scan_interval_ms": 60000, "max_connections": 4096})");
  ASSERT_FALSE(harness.address.empty());
  const int pid = harness.proc->pid();
  std::vector<std::string> ids;
  for (int i = 0; i < kSessions; ++i) {
    auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "work"})");
    ASSERT_EQ(r.status, 201) << r.body;
    ids.emplace_back(r.json.at("session").at("id").as_string());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const long base_threads = ProcStatus(pid, "Threads");
  const long base_kb = ProcStatus(pid, "VmRSS");

  const uint16_t port = static_cast<uint16_t>(std::stoi(harness.address.substr(harness.address.rfind(':') + 1)));
  std::vector<int> fds;
  std::vector<std::string> seen(kStreams);
  for (int i = 0; i < kStreams; ++i) {
    fds.push_back(OpenStream(port, ids[i % kSessions]));
    ASSERT_GE(fds.back(), 0);
  }
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(ReadUntil(fds[i], &seen[i], "event: session_created")) << i << ": " << seen[i];
    EXPECT_EQ(seen[i].rfind("HTTP/1.1 200", 0), 0u) << seen[i];
  }
  const long held_threads = ProcStatus(pid, "Threads");
  const long held_kb = ProcStatus(pid, "VmRSS");

  WriteFile(dir.Sub("gate"), "open");
  int ended = 0;
  for (int i = 0; i < kStreams; ++i) {
    // The stream closes after the terminal status (chunked encoding's last chunk).
    if (ReadUntil(fds[i], &seen[i], "SESSION_STATUS_COMPLETED") && ReadUntil(fds[i], &seen[i], "\r\n0\r\n\r\n")) ++ended;
    ::close(fds[i]);
  }
  std::printf("%d event streams over %d sessions: harness threads %ld before, %ld with all open; "
              "RSS %.1f MiB before, %.1f MiB with all open (%.1f KiB per stream)\n",
              kStreams, kSessions, base_threads, held_threads, base_kb / 1024.0, held_kb / 1024.0,
              static_cast<double>(held_kb - base_kb) / kStreams);
  ::testing::Test::RecordProperty("threads_added_by_streams", std::to_string(held_threads - base_threads));
  EXPECT_EQ(ended, kStreams);
  // A thread per stream would add at least kStreams.
  EXPECT_LT(held_threads - base_threads, kStreams / 4);
}

// http_request tool calls hold no harness thread while their request is out (libcurl's
// multi interface): with one worker thread, four sessions' requests reach the target
// together. The target holds each request until all four are there (or 30 s passed) and
// answers how many it saw; one after another, the first would have seen only itself.
TEST(HarnessScaleTest, HttpRequestToolCallsHoldNoThreadWhileTheRequestIsOut) {
  constexpr int kSessions = 4;
  testing::TempDir dir("sinew-proxy");
  StoreProcess store(dir.Sub("db"));
  ASSERT_FALSE(store.address.empty());
  Gathering gathering(kSessions);
  TestHttpServer target([&](const TestHttpServer::Request&) {
    const int together = gathering.Arrive();
    TestHttpServer::Response r;
    r.content_type = "text/plain";
    r.body = "together=" + std::to_string(together);
    return r;
  });
  WriteFile(dir.Sub("script.json"), R"({"responses": [
    {"text": "asking", "tool_calls": [{"name": "http_request", "input": {"url": ")" + target.url() + R"(/x"}}]},
    {"text": "done"}]})");
  HarnessProcess harness(dir.Sub("harness.json"), R"({"listen": "127.0.0.1:0", "workers": 1,
    "store": {"address": ")" + store.address + R"("}, "api_keys": {")" + kKey + R"(": "scale"},
    "default_model": "scripted", "models": {"scripted": {"kind": "scripted", "script": ")" +
                                                       dir.Sub("script.json") + R"("}},
    "http_request": {"allow": [{"host": "127.0.0.1:)" + std::to_string(target.port()) + R"("}]}})");
  ASSERT_FALSE(harness.address.empty());
  std::vector<std::string> ids;
  for (int i = 0; i < kSessions; ++i) {
    auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "ask"})");
    ASSERT_EQ(r.status, 201) << r.body;
    ids.emplace_back(r.json.at("session").at("id").as_string());
  }
  for (const auto& id : ids) {
    ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed", 120), "completed");
    std::string output;
    for (const auto& e : AllEvents(harness.url(), kKey, id)) {
      if (e.contains("tool_result")) output = std::string(e.at("tool_result").at("output").as_string());
    }
    EXPECT_NE(output.find("together=4"), std::string::npos) << output;
  }
}


// Model calls over HTTP hold no harness thread while the model server thinks (libcurl's
// multi interface): with one worker thread, four sessions' calls reach an
// OpenAI-compatible test double together, two streamed and two whole. The double holds
// each request until all four are there (or 30 s passed) and answers how many it saw;
// one after another (each call holding the one worker), the first would see only itself.
TEST(HarnessScaleTest, ModelCallsHoldNoThreadWhileTheModelServerThinks) {
  constexpr int kSessions = 4;
  testing::TempDir dir("sinew-model-calls");
  StoreProcess store(dir.Sub("db"));
  ASSERT_FALSE(store.address.empty());
  Gathering gathering(kSessions);
  std::atomic<int> streamed{0};
  TestHttpServer model([&](const TestHttpServer::Request& request) {
    const std::string text = "together=" + std::to_string(gathering.Arrive());
    TestHttpServer::Response r;
    if (request.body.find("\"stream\":true") != std::string::npos) {
      ++streamed;
      r.content_type = "text/event-stream";
      r.body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + text +
               "\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
               "data: [DONE]\n\n";
    } else {
      r.body = "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"" + text +
               "\"},\"finish_reason\":\"stop\"}]}";
    }
    return r;
  });
  const std::string endpoint = R"("kind": "openai", "base_url": ")" + model.url() + R"(/v1", "model": "double")";
  HarnessProcess harness(dir.Sub("harness.json"), R"({"listen": "127.0.0.1:0", "workers": 1,
    "store": {"address": ")" + store.address + R"("}, "api_keys": {")" + kKey + R"(": "scale"},
    "default_model": "streamed", "models": {"streamed": {)" + endpoint + R"(, "stream": "on"},
                                            "whole": {)" + endpoint + R"(, "stream": "off"}}})");
  ASSERT_FALSE(harness.address.empty());
  std::vector<std::string> ids;
  for (int i = 0; i < kSessions; ++i) {
    const std::string which = i % 2 == 0 ? "streamed" : "whole";
    auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "think", "model": ")" + which + R"("})");
    ASSERT_EQ(r.status, 201) << r.body;
    ids.emplace_back(r.json.at("session").at("id").as_string());
  }
  for (const auto& id : ids) {
    ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed", 120), "completed");
    std::string text;
    for (const auto& e : AllEvents(harness.url(), kKey, id)) {
      if (e.contains("model_response")) text = std::string(e.at("model_response").at("text").as_string());
    }
    EXPECT_EQ(text, "together=4");
  }
  EXPECT_EQ(gathering.arrived(), kSessions);
  EXPECT_EQ(streamed.load(), kSessions / 2);
}


// Ordinary REST requests run on a bounded pool (config.api_threads), not on a thread
// each: with the store stopped (SIGSTOP), 200 concurrent GETs of a session all wait on
// it, and the harness's thread count must not grow with them; once the store runs again,
// every request is answered. (A thread each: +200 threads while the store was stopped.)
TEST(HarnessScaleTest, OrdinaryRequestsWaitOnABoundedPoolNotAThreadEach) {
  constexpr int kRequests = 200;
  testing::TempDir dir("sinew-api-pool");
  StoreProcess store(dir.Sub("db"));
  ASSERT_FALSE(store.address.empty());
  WriteFile(dir.Sub("script.json"), R"({"responses": [{"text": "done"}]})");
  HarnessProcess harness(dir.Sub("harness.json"), R"({"listen": "127.0.0.1:0", "api_threads": 4,
    "store": {"address": ")" + store.address + R"("}, "api_keys": {")" + kKey + R"(": "scale"},
    "default_model": "scripted", "models": {"scripted": {"kind": "scripted", "script": ")" +
                                                       dir.Sub("script.json") + R"("}},
    "lease_ttl_ms": 60000, "scan_interval_ms": 60000})");
  ASSERT_FALSE(harness.address.empty());
  auto created = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "work"})");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id(created.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed", 60), "completed");
  const int pid = harness.proc->pid();
  const long base_threads = ProcStatus(pid, "Threads");

  store.proc->Signal(SIGSTOP);
  ASSERT_TRUE(WaitUntilStopped(store.proc->pid()));
  std::atomic<int> answered{0};
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i) {
    clients.emplace_back([&] {
      auto r = Api("GET", harness.url() + "/v1/sessions/" + id, kKey);
      ok += r.status == 200 ? 1 : 0;
      ++answered;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const long waiting_threads = ProcStatus(pid, "Threads");
  const int answered_while_stopped = answered.load();
  store.proc->Signal(SIGCONT);
  for (auto& t : clients) t.join();

  std::printf("harness threads: %ld before, %ld with %d requests waiting on the stopped store\n", base_threads,
              waiting_threads, kRequests - answered_while_stopped);
  EXPECT_EQ(answered_while_stopped, 0);  // they did wait on the store
  EXPECT_LT(waiting_threads, base_threads + 20);
  EXPECT_EQ(ok.load(), kRequests);
}

}  // namespace
}  // namespace sinew::harness::test
