// The common HTTP server and client against each other on loopback, plain and TLS, with
// certificates made by scripts/make-certs.sh (the real openssl command), and raw sockets
// for the malformed requests no client library sends.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "sinew/http/client.h"
#include "sinew/http/server.h"
#include "sinew/testing/subprocess.h"

namespace sinew::http {
namespace {

using sinew::testing::TempDir;

std::string SourceDir() {
  const char* dir = std::getenv("SINEW_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

// Runs scripts/make-certs.sh DIR NAME...; the CA is made once per DIR.
void MakeCerts(const std::string& dir, const std::string& names) {
  const std::string command = SourceDir() + "/scripts/make-certs.sh " + dir + " " + names;
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

// A TCP socket connected to 127.0.0.1:port, or -1.
int DialLoopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `raw` on a fresh connection and returns everything the server answers until it
// closes (or 5 s pass).
std::string RawExchange(uint16_t port, const std::string& raw) {
  const int fd = DialLoopback(port);
  if (fd < 0) return "connect failed";
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  size_t sent = 0;
  while (sent < raw.size()) {
    ssize_t n = ::send(fd, raw.data() + sent, raw.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// A handler that echoes the request, streams "n" events for /events?n, and answers 429
// for /busy.
Handler EchoHandler() {
  return [](Request request, std::shared_ptr<ResponseStream> stream) {
    if (request.target.starts_with("/events")) {
      const int n = std::atoi(request.target.c_str() + request.target.find('?') + 1);
      std::thread([stream, n] {
        stream->StartEvents();
        for (int i = 0; i < n; ++i) {
          if (!stream->SendEvent("data: " + std::to_string(i) + "\n\n") || !stream->WaitForRoom(1 << 16)) return;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        stream->EndEvents();
      }).detach();
      return;
    }
    if (request.target == "/busy") {
      stream->Send(429, "application/json", R"({"error":{"code":"busy","message":"later"}})");
      return;
    }
    stream->Send(Response{200, "text/plain",
                          request.method + " " + request.target + " " + std::string(request.Header("x-test")) + " " +
                              request.body,
                          {{"X-Echo", "yes"}}});
  };
}

ClientRequest Req(std::string url, uint32_t timeout_ms = 30000, const std::atomic<bool>* stop = nullptr) {
  ClientRequest request;
  request.url = std::move(url);
  request.timeout_ms = timeout_ms;
  request.stop = stop;
  return request;
}

std::unique_ptr<Server> StartServer(ServerOptions options, Handler handler = EchoHandler()) {
  auto server = Server::Start(options, std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(*server) : nullptr;
}

TEST(HttpServerTest, AnswersAndKeepsHeaders) {
  auto server = StartServer(ServerOptions{});
  ASSERT_NE(server, nullptr);
  ClientRequest request;
  request.method = "POST";
  request.url = "http://" + server->address() + "/echo";
  request.headers = {"X-Test: hello", "Content-Type: text/plain"};
  request.body = "body";
  auto response = Fetch(request);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "POST /echo hello body");
  EXPECT_EQ(response->Header("x-echo"), "yes");
  EXPECT_EQ(response->Header("server"), "sinew");
}

TEST(HttpServerTest, OverloadAnswersCarryRetryAfter) {
  auto server = StartServer(ServerOptions{});
  ASSERT_NE(server, nullptr);
  auto response = Fetch(Req("http://" + server->address() + "/busy"));
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->status, 429);
  EXPECT_EQ(response->Header("retry-after"), "1");
}

TEST(HttpServerTest, RefusesOversizedAndMalformedRequestsInTheCallersShape) {
  ServerOptions options;
  options.max_body_bytes = 1000;
  options.max_header_bytes = 2000;
  options.error_body = [](int status, const std::string& code, const std::string&) {
    return "{\"status\":" + std::to_string(status) + ",\"code\":\"" + code + "\"}";
  };
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  const uint16_t port = server->port();

  std::string big = RawExchange(port, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\n\r\n" +
                                          std::string(5000, 'x'));
  EXPECT_TRUE(big.starts_with("HTTP/1.1 413")) << big;
  EXPECT_NE(big.find(R"({"status":413,"code":"payload_too_large"})"), std::string::npos) << big;

  std::string headers = RawExchange(port, "GET /x HTTP/1.1\r\nHost: a\r\nX-Big: " + std::string(4000, 'h') + "\r\n\r\n");
  EXPECT_TRUE(headers.starts_with("HTTP/1.1 431")) << headers;

  for (const std::string& raw : {std::string("NOT A REQUEST\r\n\r\n"), std::string("GET / HTTP/9.9\r\nHost: a\r\n\r\n"),
                                 std::string("POST / HTTP/1.1\r\nContent-Length: 12x\r\n\r\n"),
                                 std::string("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
                                 std::string("GET / HTTP/1.1\r\nX-A: a\0b\r\n\r\n", 33)}) {
    std::string answer = RawExchange(port, raw);
    EXPECT_TRUE(answer.starts_with("HTTP/1.1 400")) << raw << " -> " << answer;
    EXPECT_NE(answer.find(R"("code":"bad_request")"), std::string::npos) << answer;
  }
  // The server still serves after all that.
  auto ok = Fetch(Req("http://" + server->address() + "/after"));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 200);
}

// "Expect: 100-continue" (libcurl sends it for bodies over 1 KiB): the interim answer
// comes before the body is read, then the answer to the whole request, on one connection
// that stays open for the next request; and an event stream's head, chunks and last
// chunk arrive in HTTP/1.1's chunked framing.
TEST(HttpServerTest, AnswersExpectContinueAndFramesEventStreamsOnOneConnection) {
  auto server = StartServer(ServerOptions{});
  ASSERT_NE(server, nullptr);
  const int fd = DialLoopback(server->port());
  ASSERT_GE(fd, 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  auto send_all = [fd](const std::string& bytes) {
    return ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  };
  // Reads until `until` has arrived (or the connection ends or 5 s pass).
  std::string in;
  auto read_until = [fd, &in](const std::string& until) {
    char buf[4096];
    while (in.find(until) == std::string::npos) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      in.append(buf, static_cast<size_t>(n));
    }
    return true;
  };
  const std::string body(3000, 'b');
  ASSERT_TRUE(send_all("POST /upload HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3000\r\n\r\n"));
  ASSERT_TRUE(read_until("\r\n\r\n")) << in;
  EXPECT_TRUE(in.starts_with("HTTP/1.1 100 Continue\r\n")) << in;
  in.clear();
  ASSERT_TRUE(send_all(body));
  ASSERT_TRUE(read_until(body)) << in;
  EXPECT_TRUE(in.starts_with("HTTP/1.1 200 OK\r\n")) << in;
  EXPECT_NE(in.find("Content-Length: " + std::to_string(std::string("POST /upload  ").size() + body.size())),
            std::string::npos)
      << in;
  EXPECT_NE(in.find("X-Echo: yes\r\n"), std::string::npos) << in;
  in.clear();
  // The same connection: an event stream of two events.
  ASSERT_TRUE(send_all("GET /events?2 HTTP/1.1\r\nHost: a\r\n\r\n"));
  ASSERT_TRUE(read_until("\r\n0\r\n\r\n")) << in;
  const size_t head_end = in.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  const std::string head = in.substr(0, head_end);
  EXPECT_TRUE(head.starts_with("HTTP/1.1 200 OK\r\n")) << head;
  EXPECT_NE(head.find("Content-Type: text/event-stream"), std::string::npos) << head;
  EXPECT_NE(head.find("Transfer-Encoding: chunked"), std::string::npos) << head;
  EXPECT_EQ(in.substr(head_end + 4), "9\r\ndata: 0\n\n\r\n9\r\ndata: 1\n\n\r\n0\r\n\r\n");
  ::close(fd);
}

TEST(HttpServerTest, ConnectionsPastTheLimitGet503) {
  ServerOptions options;
  options.max_connections = 1;
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<int> events{0};
  std::thread holder([&] {
    ClientRequest request = Req("http://" + server->address() + "/events?500", 0, &stop);
    (void)Fetch(request, [&](std::string_view) {
      events.fetch_add(1);
      return true;
    });
  });
  for (int i = 0; i < 500 && events.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GT(events.load(), 0);
  auto refused = Fetch(Req("http://" + server->address() + "/x"));
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(refused->Header("retry-after"), "1");
  stop = true;
  holder.join();
}

TEST(HttpServerTest, EventStreamsArriveInOrder) {
  auto server = StartServer(ServerOptions{});
  ASSERT_NE(server, nullptr);
  auto response = Fetch(Req("http://" + server->address() + "/events?5"));
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->Header("content-type"), "text/event-stream");
  EXPECT_EQ(response->body, "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n");
}

// Writes 256 KiB events, each after OnRoom said there is room (no thread waits), until
// the client is gone or 1000 were sent; `done` gets the count.
struct RoomPump : std::enable_shared_from_this<RoomPump> {
  std::shared_ptr<ResponseStream> stream;
  std::promise<int> done;
  int sent = 0;
  void Next() {
    if (sent == 1000 || !stream->SendEvent("data: " + std::string(256 << 10, 'x') + "\n\n")) {
      done.set_value(sent);
      return;
    }
    ++sent;
    auto self = shared_from_this();
    stream->OnRoom(1 << 20, [self](bool room) {
      if (room) return self->Next();
      self->done.set_value(self->sent);
    });
  }
};

// A client that stops reading holds the writer back (OnRoom waits), and its hang-up
// ends the wait with false.
TEST(HttpServerTest, OnRoomHoldsAWriterBackForASlowReaderAndReportsTheHangUp) {
  auto pump = std::make_shared<RoomPump>();
  auto finished = pump->done.get_future();
  auto server = StartServer(ServerOptions{}, [pump](Request, std::shared_ptr<ResponseStream> stream) {
    pump->stream = std::move(stream);
    pump->stream->StartEvents();
    pump->Next();
  });
  ASSERT_NE(server, nullptr);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server->port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string request = "GET /big HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  char buf[1024];
  ASSERT_GT(::recv(fd, buf, sizeof buf, 0), 0);  // the stream started; now read no more
  EXPECT_EQ(finished.wait_for(std::chrono::milliseconds(500)), std::future_status::timeout)
      << "the writer was not held back by a client that reads nothing";
  ::close(fd);
  ASSERT_EQ(finished.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "the hang-up was not reported";
  EXPECT_LT(finished.get(), 1000);
  pump->stream.reset();
}

// Stop closes the acceptor while connections keep arriving on several I/O threads; an
// accept finishing on one thread must never restart on an acceptor another thread is
// closing (a crash CI once caught in a test's server teardown: about 1 stop in 2,000).
TEST(HttpServerTest, StoppingWhileConnectionsArriveIsSafe) {
  for (int round = 0; round < 150; ++round) {
    ServerOptions options;
    options.io_threads = 4;
    auto server = StartServer(options);
    ASSERT_NE(server, nullptr);
    const uint16_t port = server->port();
    std::atomic<bool> done{false};
    std::vector<std::thread> dialers;
    for (int d = 0; d < 3; ++d) {
      dialers.emplace_back([&] {
        while (!done.load()) {
          const int fd = DialLoopback(port);
          if (fd < 0) continue;
          // Closed with a reset: no TIME_WAIT, so thousands of dials use no ports up.
          linger reset{1, 0};
          ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
          ::close(fd);
        }
      });
    }
    // The server answers while the dialers run; then it stops under them.
    auto response = Fetch(Req("http://" + server->address() + "/live", 5000));
    ASSERT_TRUE(response.ok()) << "round " << round << ": " << response.status().ToString();
    EXPECT_EQ(response->status, 200);
    server->Stop();
    done = true;
    for (auto& t : dialers) t.join();
  }
}

TEST(HttpServerTest, ABadHostOrTakenPortIsAnError) {
  ServerOptions bad_host;
  bad_host.host = "not-an-ip";
  EXPECT_EQ(Server::Start(bad_host, EchoHandler()).status().code(), StatusCode::kInvalidArgument);
  auto first = StartServer(ServerOptions{});
  ASSERT_NE(first, nullptr);
  ServerOptions same;
  same.port = first->port();
  EXPECT_EQ(Server::Start(same, EchoHandler()).status().code(), StatusCode::kUnavailable);
}

class HttpsTest : public ::testing::Test {
 protected:
  void SetUp() override { MakeCerts(certs_.path(), "server"); }
  std::string Path(const std::string& name) const { return certs_.Sub(name); }
  ServerOptions TlsOptions(std::chrono::milliseconds watch = std::chrono::milliseconds(0)) const {
    ServerOptions options;
    options.tls.cert_file = Path("server.pem");
    options.tls.key_file = Path("server-key.pem");
    options.tls.watch_interval = watch;
    return options;
  }
  static ClientRequest Get(const Server& server, const std::string& ca, const std::string& path = "/x") {
    ClientRequest request;
    request.url = "https://localhost:" + std::to_string(server.port()) + path;
    request.tls.ca_file = ca;
    return request;
  }
  TempDir certs_{"sinew-http-certs"};
};

TEST_F(HttpsTest, ServesTlsToClientsThatTrustTheCa) {
  auto server = StartServer(TlsOptions());
  ASSERT_NE(server, nullptr);
  auto response = Fetch(Get(*server, Path("ca.pem")));
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "GET /x  ");
  // A client that does not trust the CA refuses the server.
  auto untrusted = Fetch(Get(*server, "/etc/ssl/certs/ca-certificates.crt"));
  EXPECT_EQ(untrusted.status().code(), StatusCode::kUnavailable);
  // Plain HTTP to the TLS port gets no HTTP answer, and the server lives on.
  std::string plain = RawExchange(server->port(), "GET /x HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_FALSE(plain.starts_with("HTTP/1.1 200")) << plain;
  EXPECT_TRUE(Fetch(Get(*server, Path("ca.pem"))).ok());
}

TEST_F(HttpsTest, RefusesUnreadableOrMismatchedFiles) {
  ServerOptions missing = TlsOptions();
  missing.tls.key_file = Path("nope.pem");
  EXPECT_EQ(Server::Start(missing, EchoHandler()).status().code(), StatusCode::kInvalidArgument);
  MakeCerts(certs_.path(), "other");
  ServerOptions mismatched = TlsOptions();
  mismatched.tls.key_file = Path("other-key.pem");
  auto status = Server::Start(mismatched, EchoHandler()).status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("other-key.pem"), std::string::npos) << status.message();
}

// A new CA's certificate replaces the old one: new connections see it, an event stream
// opened before the reload runs on to its end, and a failed reload keeps the old one.
TEST_F(HttpsTest, ReloadsCertificatesWithoutDroppingConnections) {
  auto server = StartServer(TlsOptions());
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->tls_generation(), 1u);
  std::string stream_body;
  Status stream_status;
  long stream_http = 0;
  std::thread stream([&] {
    ClientRequest request = Get(*server, Path("ca.pem"), "/events?40");
    request.timeout_ms = 0;
    auto response = Fetch(request);
    stream_status = response.status();
    if (response.ok()) {
      stream_http = response->status;
      stream_body = response->body;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));

  TempDir second("sinew-http-certs2");
  MakeCerts(second.path(), "server");
  std::filesystem::copy_file(second.Sub("server.pem"), Path("server.pem"),
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(second.Sub("server-key.pem"), Path("server-key.pem"),
                             std::filesystem::copy_options::overwrite_existing);
  ASSERT_TRUE(server->ReloadTls().ok());
  EXPECT_EQ(server->tls_generation(), 2u);
  auto with_new_ca = Fetch(Get(*server, second.Sub("ca.pem")));
  ASSERT_TRUE(with_new_ca.ok()) << with_new_ca.status().ToString();
  EXPECT_EQ(with_new_ca->status, 200);
  EXPECT_FALSE(Fetch(Get(*server, Path("ca.pem"))).ok());

  // A broken pair is refused and the current certificate stays.
  std::filesystem::copy_file(Path("ca.pem"), Path("server.pem"), std::filesystem::copy_options::overwrite_existing);
  EXPECT_FALSE(server->ReloadTls().ok());
  EXPECT_EQ(server->tls_generation(), 2u);
  EXPECT_TRUE(Fetch(Get(*server, second.Sub("ca.pem"))).ok());

  stream.join();
  ASSERT_TRUE(stream_status.ok()) << stream_status.ToString();
  EXPECT_EQ(stream_http, 200);
  EXPECT_NE(stream_body.find("data: 39\n\n"), std::string::npos) << stream_body;
}

TEST_F(HttpsTest, ReloadsWhenTheFilesChange) {
  auto server = StartServer(TlsOptions(std::chrono::milliseconds(100)));
  ASSERT_NE(server, nullptr);
  TempDir second("sinew-http-certs2");
  MakeCerts(second.path(), "server");
  std::filesystem::copy_file(second.Sub("server-key.pem"), Path("server-key.pem"),
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(second.Sub("server.pem"), Path("server.pem"),
                             std::filesystem::copy_options::overwrite_existing);
  for (int i = 0; i < 100 && server->tls_generation() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_GE(server->tls_generation(), 2u);
  auto response = Fetch(Get(*server, second.Sub("ca.pem")));
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
}

TEST(HttpServerTest, PlainHttpOnlyOnLoopback) {
  EXPECT_TRUE(CheckPlainOnlyOnLoopback("127.0.0.1", false, false, "--insecure").ok());
  EXPECT_TRUE(CheckPlainOnlyOnLoopback("::1", false, false, "--insecure").ok());
  EXPECT_TRUE(CheckPlainOnlyOnLoopback("[::1]", false, false, "--insecure").ok());
  Status open = CheckPlainOnlyOnLoopback("0.0.0.0", false, false, "--insecure");
  EXPECT_EQ(open.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(open.message().find("--insecure"), std::string::npos) << open.message();
  EXPECT_FALSE(CheckPlainOnlyOnLoopback("10.1.2.3", false, false, "x").ok());
  EXPECT_TRUE(CheckPlainOnlyOnLoopback("0.0.0.0", true, false, "x").ok());   // TLS
  EXPECT_TRUE(CheckPlainOnlyOnLoopback("0.0.0.0", false, true, "x").ok());   // said insecure
}

TEST(HttpClientTest, StoppingAStreamIsNotAnError) {
  auto server = StartServer(ServerOptions{});
  ASSERT_NE(server, nullptr);
  int seen = 0;
  auto response = Fetch(Req("http://" + server->address() + "/events?100", 0),
                        [&](std::string_view) { return ++seen < 3; });
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_TRUE(response->stopped);
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(seen, 3);
  auto refused = Fetch(Req("http://127.0.0.1:1/x"));
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("127.0.0.1:1"), std::string::npos);
}

// AsyncClient: many requests at once on its one thread. A server that answers each
// request 300 ms later sees them all in flight together; every answer arrives whole.
TEST(HttpClientTest, AsyncClientRunsManyRequestsAtOnceOnOneThread) {
  std::atomic<int> in_flight{0}, most{0};
  auto server = StartServer(ServerOptions{}, [&](Request request, std::shared_ptr<ResponseStream> stream) {
    const int now = ++in_flight;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    std::thread([&in_flight, stream, target = request.target] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      --in_flight;
      stream->Send(200, "text/plain", "answer to " + target);
    }).detach();
  });
  ASSERT_NE(server, nullptr);
  constexpr int kRequests = 20;
  std::vector<std::promise<Result<ClientResponse>>> answers(kRequests);
  std::set<std::thread::id> callback_threads;
  std::mutex mu;
  {
    AsyncClient client;
    for (int i = 0; i < kRequests; ++i) {
      client.Start(Req("http://" + server->address() + "/r" + std::to_string(i)), nullptr,
                   [&, i](Result<ClientResponse> r) {
                     {
                       std::lock_guard<std::mutex> lock(mu);
                       callback_threads.insert(std::this_thread::get_id());
                     }
                     answers[i].set_value(std::move(r));
                   });
    }
    for (int i = 0; i < kRequests; ++i) {
      auto r = answers[i].get_future().get();
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->status, 200);
      EXPECT_EQ(r->body, "answer to /r" + std::to_string(i));
    }
  }
  EXPECT_EQ(callback_threads.size(), 1u);
  EXPECT_GT(most.load(), kRequests / 2) << "the requests were not in flight together";
}

// A stop flag ends a transfer (stopped, not an error); destroying the client cancels
// what still runs; a refused connection is kUnavailable, as with Fetch.
TEST(HttpClientTest, AsyncClientStopsCancelsAndReportsRefusals) {
  auto server = StartServer(ServerOptions{});
  ASSERT_NE(server, nullptr);
  std::atomic<bool> stop{false};
  std::promise<Result<ClientResponse>> stopped, cancelled, refused;
  {
    AsyncClient client;
    client.Start(Req("http://" + server->address() + "/events?1000", 0, &stop), nullptr,
                 [&](Result<ClientResponse> r) { stopped.set_value(std::move(r)); });
    client.Start(Req("http://127.0.0.1:1/x"), nullptr, [&](Result<ClientResponse> r) { refused.set_value(std::move(r)); });
    auto refusal = refused.get_future().get();
    EXPECT_EQ(refusal.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(refusal.status().message().find("127.0.0.1:1"), std::string::npos);
    stop = true;
    auto ended = stopped.get_future().get();
    ASSERT_TRUE(ended.ok()) << ended.status().ToString();
    EXPECT_TRUE(ended->stopped);
    client.Start(Req("http://" + server->address() + "/events?1000", 0), [](std::string_view) { return true; },
                 [&](Result<ClientResponse> r) { cancelled.set_value(std::move(r)); });
  }
  EXPECT_EQ(cancelled.get_future().get().status().code(), StatusCode::kCancelled);
  // After Stop, a request is answered at once, cancelled.
  AsyncClient stopped_client;
  stopped_client.Stop();
  std::promise<Result<ClientResponse>> late;
  stopped_client.Start(Req("http://" + server->address() + "/x"), nullptr,
                       [&](Result<ClientResponse> r) { late.set_value(std::move(r)); });
  EXPECT_EQ(late.get_future().get().status().code(), StatusCode::kCancelled);
}

}  // namespace
}  // namespace sinew::http
