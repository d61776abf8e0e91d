// SandboxClient: calls the tools of one sandbox (the Sandbox service of
// proto/sandbox.proto, served by sinew-sandbox-agent inside the container).
//
// Tool failures (bad input, missing file, non-zero exit) come back as an OK Result
// whose ExecuteResult has is_error set: hand them to the model. A non-OK Result means
// the sandbox could not be reached or broke (kUnavailable, kDeadlineExceeded, ...):
// ask the provisioner how it ended (ProvisionerClient::Get) and treat it as lost.
//
// Thread-safety: all methods may be called concurrently from several threads.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sinew/proto/sandbox.pb.h"
#include "sinew/status.h"

namespace sinew::sandbox {

struct SandboxClientOptions {
  // Deadline of one Execute call, on top of any timeout inside the tool input.
  // Default: 10 minutes
  std::chrono::milliseconds call_timeout{std::chrono::minutes(10)};
  // How long Connect waits for the agent to answer. Default: 5 s
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(5)};
};

class SandboxClient {
 public:
  virtual ~SandboxClient() = default;

  // Connects to `endpoint`, a gRPC target such as "unix:///run/sinew/sandboxes/<id>/agent.sock"
  // (SandboxInfo.endpoint). Fails with kUnavailable when nothing answers in time.
  [[nodiscard]] static Result<std::unique_ptr<SandboxClient>> Connect(
      std::string endpoint, SandboxClientOptions options = {});

  // Runs tool `name` with its JSON input and returns the result.
  [[nodiscard]] virtual Result<v1::ExecuteResult> Execute(std::string_view name,
                                                          std::string_view input_json) = 0;

  // Like Execute, and calls `on_output(is_stderr, bytes)` for each chunk of output as it
  // comes (bash only). The callback runs on the calling thread.
  using OutputCallback = std::function<void(bool is_stderr, std::string_view bytes)>;
  [[nodiscard]] virtual Result<v1::ExecuteResult> ExecuteStream(std::string_view name,
                                                                std::string_view input_json,
                                                                const OutputCallback& on_output) = 0;

  // The tools this sandbox serves, with descriptions, JSON schemas and idempotent flags.
  [[nodiscard]] virtual Result<std::vector<v1::ToolSpec>> ListTools() = 0;
};

}  // namespace sinew::sandbox
