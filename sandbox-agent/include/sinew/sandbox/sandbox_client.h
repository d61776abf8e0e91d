// SandboxClient: calls the tools of one sandbox (the Sandbox service of
// proto/sandbox.proto, served by sinew-sandbox-agent inside the container).
//
// Tool failures (bad input, missing file, non-zero exit) come back as an OK Result
// whose ExecuteResult has is_error set: hand them to the model. A non-OK Result means
// the sandbox could not be reached or broke (kUnavailable, kDeadlineExceeded, ...):
// ask the provisioner how it ended (ProvisionerClient::Get) and treat it as lost.
//
// The channel (docs/sandbox.md, "The agent channel"): a "unix://PATH" endpoint is opened
// without following any symbolic link (openat2 RESOLVE_NO_SYMLINKS), the peer's uid is
// checked against `expected_uid` (SO_PEERCRED), and with a `secret` every call carries it
// and checks the agent's proof for `sandbox_id`: a client never talks to a sandbox other
// than the one it asked for (kPermissionDenied). A broken connection is dialled afresh
// on the next call.
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
  // The sandbox this client must reach (SandboxInfo.id and .agent_secret). With an empty
  // secret nothing is authenticated (agents run on a host by tests). Default: empty
  std::string sandbox_id;
  std::string secret;
  // SandboxInfo.host_uid: the peer of a unix endpoint must run as this host uid.
  // 0: not checked. Default: 0
  uint32_t expected_uid = 0;
};

class SandboxClient {
 public:
  virtual ~SandboxClient() = default;

  // Connects to `endpoint`, a gRPC target such as "unix:///run/sinew/sandboxes/<id>/agent.sock"
  // (SandboxInfo.endpoint). Fails with kUnavailable when nothing answers in time.
  [[nodiscard]] static Result<std::unique_ptr<SandboxClient>> Connect(
      std::string endpoint, SandboxClientOptions options = {});

  // Connects to the sandbox `info` describes (Provision's or Get's answer): its endpoint,
  // with sandbox_id, secret and expected_uid taken from it.
  [[nodiscard]] static Result<std::unique_ptr<SandboxClient>> ConnectTo(
      const v1::SandboxInfo& info, SandboxClientOptions options = {});

  // Runs tool `name` with its JSON input and returns the result. With a `call_id` the
  // call runs exactly once while the sandbox lives: repeating it (after a lost
  // connection, from another process) returns the first run's result (`replayed`).
  [[nodiscard]] virtual Result<v1::ExecuteResult> Execute(std::string_view name,
                                                          std::string_view input_json,
                                                          std::string_view call_id = {}) = 0;

  // Execute without holding the calling thread while the tool runs (gRPC's callback
  // API): returns at once; `done` gets what Execute would return, on a gRPC thread or
  // (for input refused before any call, or when no channel could be opened) on the
  // calling thread. `done` must be quick and must not block. The client must outlive
  // the call. Opening the channel, when none is open yet, blocks as in Execute.
  using ExecuteDone = std::function<void(Result<v1::ExecuteResult>)>;
  virtual void ExecuteAsync(std::string_view name, std::string_view input_json, std::string_view call_id,
                            ExecuteDone done) = 0;

  // Like Execute, and calls `on_output(is_stderr, bytes)` for each chunk of output as it
  // comes (bash only). The callback runs on the calling thread.
  using OutputCallback = std::function<void(bool is_stderr, std::string_view bytes)>;
  [[nodiscard]] virtual Result<v1::ExecuteResult> ExecuteStream(
      std::string_view name, std::string_view input_json, const OutputCallback& on_output,
      std::string_view call_id = {}) = 0;

  // Stops the call with `call_id` (see CancelCallRequest in proto/sandbox.proto); true
  // when it was running. The call's caller gets its (cancelled) result as usual.
  [[nodiscard]] virtual Result<bool> CancelCall(std::string_view call_id) = 0;

  // The tools this sandbox serves, with descriptions, JSON schemas and idempotent flags.
  [[nodiscard]] virtual Result<std::vector<v1::ToolSpec>> ListTools() = 0;

  // File transfer (ReadFile and WriteFile of proto/sandbox.proto): the bytes of the
  // regular file `path` below the workspace, at most `max_bytes` (0: the agent's cap).
  // The agent's refusals keep their codes: kInvalidArgument (a path outside the
  // workspace or through a link that leaves it, not a regular file), kNotFound,
  // kResourceExhausted (larger than allowed).
  [[nodiscard]] virtual Result<std::string> ReadFile(std::string_view path, uint64_t max_bytes) = 0;
  // Writes `data` to `path` below the workspace, all or nothing, in chunks; nothing is
  // sent before the agent has proven it is the sandbox asked for. Refusals as ReadFile's,
  // kResourceExhausted also for a full workspace.
  [[nodiscard]] virtual Result<v1::WriteFileResult> WriteFile(std::string_view path,
                                                             std::string_view data) = 0;
};

}  // namespace sinew::sandbox
