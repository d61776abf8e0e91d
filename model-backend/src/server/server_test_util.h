// Test helpers: runs the real sinew-model binary on loopback and talks to it with
// libcurl. Nothing here is a test double.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sinew::model::testing {

// Path of ../shared/models/stories260K.gguf from the source tree.
std::string StoriesPath();
// Lowercase hex sha256 of a file ("" if unreadable).
std::string Sha256OfFile(const std::string& path);
inline constexpr char kStoriesSha256[] =
    "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d";

// A running sinew-model process; SIGTERM and reaped on destruction.
class ServerProcess {
 public:
  // Starts `sinew-model --model stories260K --port 0 --grpc-port 0 extra_args...` and
  // waits until both listeners are up. Returns nullptr (with a message in `error`) if
  // the process could not start.
  static std::unique_ptr<ServerProcess> Start(const std::vector<std::string>& extra_args,
                                              std::string* error);
  ~ServerProcess();

  uint16_t http_port() const { return http_port_; }
  uint16_t grpc_port() const { return grpc_port_; }
  // True while the process has not exited.
  bool Alive();

 private:
  pid_t pid_ = -1;
  uint16_t http_port_ = 0;
  uint16_t grpc_port_ = 0;
};

// Runs `sinew-model args...` to its end (killed after 120 s); returns its exit status
// (-1 if it did not exit normally) and its stdout+stderr in `output`.
int RunServerToExit(const std::vector<std::string>& args, std::string* output);

struct HttpResult {
  long status = 0;  // 0: transport failure (see error)
  std::string body;
  std::string content_type;
  int body_callbacks = 0;  // how many pieces the body arrived in
  std::string headers;     // response header lines, "name: value\r\n", names in lower case
  std::string error;
};

// One HTTP request through libcurl to 127.0.0.1:port.
HttpResult HttpCall(uint16_t port, const std::string& method, const std::string& path,
                    const std::string& body = "",
                    const std::string& content_type = "application/json");

// The `data:` payloads of an SSE body, in order.
std::vector<std::string> SseData(const std::string& body);

// What a client rebuilds from a streamed chat completion.
struct StreamedChat {
  std::string content;    // every content delta, concatenated
  std::string reasoning;  // every reasoning_content delta, concatenated
  struct Call {
    std::string id, type, name;  // from the call's first delta
    std::string arguments;       // every arguments piece, concatenated
    int argument_deltas = 0;     // deltas that carried argument text
  };
  std::vector<Call> calls;  // by index
  std::string finish_reason;
  bool done = false;        // ended with data: [DONE]
  std::string error;        // a malformed stream (a call's delta before its first, ...)
};
StreamedChat CollectChatStream(const std::string& sse_body);

}  // namespace sinew::model::testing
