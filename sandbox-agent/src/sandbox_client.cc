// gRPC implementation of SandboxClient.
#include "sinew/sandbox/sandbox_client.h"

#include <fcntl.h>
#include <google/protobuf/stubs/common.h>
#include <grpcpp/create_channel_posix.h>
#include <grpcpp/grpcpp.h>
#include <linux/openat2.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "auth/agent_proof.h"
#include "sinew/grpc_callback_queue.h"
#include "sinew/grpc_status.h"
#include "sinew/grpc_trace.h"
#include "sinew/proto/sandbox.grpc.pb.h"
#include "util/unique_fd.h"

namespace sinew::sandbox {
namespace {

constexpr int kMaxMessageBytes = 64 << 20;
constexpr std::string_view kUnixPrefix = "unix://";

grpc::ChannelArguments ChannelArgs() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  return args;
}

// Connects to the unix socket at `path` without following any symbolic link on the way
// (the socket is opened as a path first, then connected through /proc/self/fd).
Result<UniqueFd> DialUnix(const std::string& path, uint32_t expected_uid) {
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long pfd = syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof(how));
  if (pfd < 0 && errno == ENOSYS) pfd = open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (pfd < 0) {
    int err = errno;
    if (err == ELOOP) {
      return Status::PermissionDenied("sandbox socket path " + path +
                                      " goes through a symbolic link; refusing to follow it");
    }
    return Status::Unavailable("sandbox socket " + path + ": " + std::strerror(err));
  }
  UniqueFd path_fd(static_cast<int>(pfd));
  UniqueFd sock(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (sock.get() < 0) return Status::IOError(std::string("socket: ") + std::strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string via = "/proc/self/fd/" + std::to_string(path_fd.get());
  via.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
  if (connect(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Status::Unavailable("cannot connect to sandbox socket " + path + ": " + std::strerror(errno));
  }
  if (expected_uid != 0) {
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(sock.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != expected_uid) {
      return Status::PermissionDenied("the process behind " + path + " runs as uid " +
                                      std::to_string(cred.uid) + ", not the sandbox's uid " +
                                      std::to_string(expected_uid));
    }
  }
  // gRPC's event loop expects a non-blocking descriptor.
  fcntl(sock.get(), F_SETFL, fcntl(sock.get(), F_GETFL) | O_NONBLOCK);
  return sock;
}

class GrpcSandboxClient final : public SandboxClient {
 public:
  GrpcSandboxClient(std::string endpoint, SandboxClientOptions options)
      : endpoint_(std::move(endpoint)), options_(std::move(options)) {
    PinGrpcCallbackQueue();  // ExecuteAsync uses the callback API
  }

  // Opens the channel (again, after a failure); waits until it is connected.
  Status Dial() {
    std::shared_ptr<grpc::Channel> channel;
    if (endpoint_.rfind(kUnixPrefix, 0) == 0) {
      SINEW_ASSIGN_OR_RETURN(UniqueFd fd, DialUnix(endpoint_.substr(kUnixPrefix.size()), options_.expected_uid));
      auto args = ChannelArgs();
      // Already connected (and checked); such a channel has no connectivity state.
      channel = grpc::CreateCustomInsecureChannelFromFd("sandbox", fd.release(), args);
    } else {
      channel = grpc::CreateCustomChannel(endpoint_, grpc::InsecureChannelCredentials(), ChannelArgs());
      if (!channel->WaitForConnected(std::chrono::system_clock::now() + options_.connect_timeout)) {
        return Status::Unavailable("sandbox agent at " + endpoint_ + " did not answer within " +
                                   std::to_string(options_.connect_timeout.count()) + " ms");
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    stub_ = v1::Sandbox::NewStub(channel);
    return Status::Ok();
  }

  Result<v1::ExecuteResult> Execute(std::string_view name, std::string_view input_json,
                                    std::string_view call_id) override {
    if (auto rejected = RejectNonUtf8(name, input_json)) return *rejected;
    SINEW_ASSIGN_OR_RETURN(auto stub, Stub());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.call_timeout);
    std::string nonce = Authenticate(ctx);
    AddTraceMetadata(&ctx);
    v1::ExecuteRequest req = MakeRequest(name, input_json, call_id);
    v1::ExecuteResult result;
    grpc::Status s = stub->Execute(&ctx, req, &result);
    if (!s.ok()) return Failed(s, "sandbox Execute");
    SINEW_RETURN_IF_ERROR(CheckProof(ctx, nonce));
    return result;
  }

  void ExecuteAsync(std::string_view name, std::string_view input_json, std::string_view call_id,
                    ExecuteDone done) override {
    if (auto rejected = RejectNonUtf8(name, input_json)) return done(*std::move(rejected));
    auto stub = Stub();
    if (!stub.ok()) return done(stub.status());
    // What gRPC uses until the call ends, released by the completion callback. Nothing
    // there may release the channel: destroying a channel inside one of its own callbacks
    // breaks gRPC's reference counts (it aborted the harness), so a failure marks the
    // channel for a redial by the next call on the caller's thread instead of resetting
    // it as Failed does.
    struct Call {
      grpc::ClientContext ctx;
      v1::ExecuteRequest req;
      v1::ExecuteResult result;
      std::string nonce;
      ExecuteDone done;
    };
    auto call = std::make_shared<Call>();
    call->ctx.set_deadline(std::chrono::system_clock::now() + options_.call_timeout);
    call->nonce = Authenticate(call->ctx);
    AddTraceMetadata(&call->ctx);
    call->req = MakeRequest(name, input_json, call_id);
    call->done = std::move(done);
    Call* raw = call.get();
    (*stub)->async()->Execute(&raw->ctx, &raw->req, &raw->result, [this, call](grpc::Status s) {
      if (!s.ok()) {
        if (s.error_code() == grpc::StatusCode::UNAVAILABLE) redial_.store(true);
        // Last use of `this`: the caller may destroy the client once done has run.
        return call->done(FromGrpcStatus(s).WithContext("sandbox Execute"));
      }
      if (Status proof = CheckProof(call->ctx, call->nonce); !proof.ok()) return call->done(proof);
      call->done(std::move(call->result));
    });
  }

  Result<v1::ExecuteResult> ExecuteStream(std::string_view name, std::string_view input_json,
                                          const OutputCallback& on_output,
                                          std::string_view call_id) override {
    if (auto rejected = RejectNonUtf8(name, input_json)) return *rejected;
    SINEW_ASSIGN_OR_RETURN(auto stub, Stub());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.call_timeout);
    std::string nonce = Authenticate(ctx);
    AddTraceMetadata(&ctx);
    v1::ExecuteRequest req = MakeRequest(name, input_json, call_id);
    auto reader = stub->ExecuteStream(&ctx, req);
    v1::ExecuteChunk chunk;
    std::optional<v1::ExecuteResult> result;
    bool proven = false;
    while (reader->Read(&chunk)) {
      if (!proven) {
        // Nothing the stream says is believed before the agent has proven who it is.
        SINEW_RETURN_IF_ERROR(CheckProof(ctx, nonce));
        proven = true;
      }
      switch (chunk.kind_case()) {
        case v1::ExecuteChunk::kStdoutBytes:
          if (on_output) on_output(false, chunk.stdout_bytes());
          break;
        case v1::ExecuteChunk::kStderrBytes:
          if (on_output) on_output(true, chunk.stderr_bytes());
          break;
        case v1::ExecuteChunk::kResult:
          result = std::move(*chunk.mutable_result());
          break;
        case v1::ExecuteChunk::KIND_NOT_SET:
          break;
      }
    }
    grpc::Status s = reader->Finish();
    if (!s.ok()) return Failed(s, "sandbox ExecuteStream");
    if (!result) return Status::Internal("sandbox ExecuteStream ended without a result");
    return *std::move(result);
  }

  Result<bool> CancelCall(std::string_view call_id) override {
    SINEW_ASSIGN_OR_RETURN(auto stub, Stub());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.connect_timeout);
    std::string nonce = Authenticate(ctx);
    AddTraceMetadata(&ctx);
    v1::CancelCallRequest req;
    req.set_call_id(std::string(call_id));
    v1::CancelCallResponse resp;
    grpc::Status s = stub->CancelCall(&ctx, req, &resp);
    if (!s.ok()) return Failed(s, "sandbox CancelCall");
    SINEW_RETURN_IF_ERROR(CheckProof(ctx, nonce));
    return resp.running();
  }

  Result<std::vector<v1::ToolSpec>> ListTools() override {
    SINEW_ASSIGN_OR_RETURN(auto stub, Stub());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.connect_timeout);
    std::string nonce = Authenticate(ctx);
    AddTraceMetadata(&ctx);
    v1::ListToolsResponse resp;
    grpc::Status s = stub->ListTools(&ctx, v1::ListToolsRequest(), &resp);
    if (!s.ok()) return Failed(s, "sandbox ListTools");
    SINEW_RETURN_IF_ERROR(CheckProof(ctx, nonce));
    return std::vector<v1::ToolSpec>(resp.tools().begin(), resp.tools().end());
  }

  Result<std::string> ReadFile(std::string_view path, uint64_t max_bytes) override {
    SINEW_ASSIGN_OR_RETURN(auto stub, Stub());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.call_timeout);
    std::string nonce = Authenticate(ctx);
    AddTraceMetadata(&ctx);
    v1::ReadFileRequest req;
    req.set_path(std::string(path));
    req.set_max_bytes(max_bytes);
    auto reader = stub->ReadFile(&ctx, req);
    v1::FileChunk chunk;
    std::string out;
    bool proven = false;
    while (reader->Read(&chunk)) {
      if (!proven) {
        // Nothing the stream says is believed before the agent has proven who it is.
        if (Status proof = CheckProof(ctx, nonce); !proof.ok()) {
          ctx.TryCancel();
          return proof;
        }
        proven = true;
        if (max_bytes != 0 && chunk.total_bytes() > max_bytes) {
          ctx.TryCancel();
          return Status::ResourceExhausted("the file is " + std::to_string(chunk.total_bytes()) +
                                           " bytes, more than the " + std::to_string(max_bytes) + " allowed");
        }
        out.reserve(chunk.total_bytes());
      }
      if (max_bytes != 0 && out.size() + chunk.data().size() > max_bytes) {
        ctx.TryCancel();
        return Status::ResourceExhausted("the file grew past the " + std::to_string(max_bytes) +
                                         " bytes allowed while it was read");
      }
      out += chunk.data();
    }
    grpc::Status s = reader->Finish();
    if (!s.ok()) return Failed(s, "sandbox ReadFile");
    if (!proven) return Status::Internal("sandbox ReadFile ended without data");
    return out;
  }

  Result<v1::WriteFileResult> WriteFile(std::string_view path, std::string_view data) override {
    constexpr size_t kChunkBytes = 1 << 20;
    SINEW_ASSIGN_OR_RETURN(auto stub, Stub());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.call_timeout);
    std::string nonce = Authenticate(ctx);
    AddTraceMetadata(&ctx);
    v1::WriteFileResult result;
    auto writer = stub->WriteFile(&ctx, &result);
    // No byte goes out before the agent has proven who it is (or has refused the call).
    writer->WaitForInitialMetadata();
    Status proof = CheckProof(ctx, nonce);
    bool sending = proof.ok();
    size_t off = 0;
    bool first = true;
    while (sending && (first || off < data.size())) {
      v1::FileChunk chunk;
      if (first) {
        chunk.set_path(std::string(path));
        chunk.set_total_bytes(data.size());
      }
      const size_t n = std::min(kChunkBytes, data.size() - off);
      chunk.set_data(data.data() + off, n);
      off += n;
      first = false;
      sending = writer->Write(chunk);  // false: the agent ended the call (its status says why)
    }
    if (!proof.ok()) ctx.TryCancel();
    else writer->WritesDone();
    grpc::Status s = writer->Finish();
    if (!proof.ok()) {
      // A call the agent refused outright (no secret, wrong secret) says so itself.
      if (!s.ok() && s.error_code() != grpc::StatusCode::CANCELLED) return Failed(s, "sandbox WriteFile");
      return proof;
    }
    if (!s.ok()) return Failed(s, "sandbox WriteFile");
    return result;
  }

 private:
  Result<std::shared_ptr<v1::Sandbox::Stub>> Stub() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (redial_.exchange(false)) stub_.reset();  // an ExecuteAsync failed for the transport
      if (stub_) return stub_;
    }
    SINEW_RETURN_IF_ERROR(Dial());
    std::lock_guard<std::mutex> lock(mu_);
    return stub_;
  }

  // A transport failure drops the channel: the next call dials afresh (and re-checks the
  // peer), since a channel made from a descriptor cannot reconnect by itself.
  Status Failed(const grpc::Status& s, const char* what) {
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
      std::lock_guard<std::mutex> lock(mu_);
      stub_.reset();
    }
    return FromGrpcStatus(s).WithContext(what);
  }

  std::string Authenticate(grpc::ClientContext& ctx) const {
    if (options_.secret.empty()) return {};
    std::string nonce = RandomHex(16);
    ctx.AddMetadata(kSecretMetadata, options_.secret);
    ctx.AddMetadata(kNonceMetadata, nonce);
    return nonce;
  }

  Status CheckProof(const grpc::ClientContext& ctx, const std::string& nonce) const {
    if (options_.secret.empty()) return Status::Ok();
    const auto& md = ctx.GetServerInitialMetadata();
    auto it = md.find(kProofMetadata);
    std::string_view got = it == md.end() ? std::string_view() : std::string_view(it->second.data(), it->second.size());
    if (!SecretsEqual(got, AgentProof(options_.secret, options_.sandbox_id, nonce))) {
      return Status::PermissionDenied("the agent at " + endpoint_ + " is not sandbox " +
                                      options_.sandbox_id + " (its proof does not match)");
    }
    return Status::Ok();
  }

  // Protobuf strings must be UTF-8; a model that produced anything else gets a tool
  // error it can act on instead of a transport failure.
  static std::optional<v1::ExecuteResult> RejectNonUtf8(std::string_view name,
                                                        std::string_view input_json) {
    if (google::protobuf::internal::IsStructurallyValidUTF8(name.data(),
                                                            static_cast<int>(name.size())) &&
        google::protobuf::internal::IsStructurallyValidUTF8(input_json.data(),
                                                            static_cast<int>(input_json.size()))) {
      return std::nullopt;
    }
    v1::ExecuteResult r;
    r.set_is_error(true);
    r.set_output("the tool name or input is not valid UTF-8; send the input as UTF-8 JSON");
    return r;
  }

  static v1::ExecuteRequest MakeRequest(std::string_view name, std::string_view input_json,
                                        std::string_view call_id) {
    v1::ExecuteRequest req;
    req.set_name(std::string(name));
    req.set_input_json(std::string(input_json));
    req.set_call_id(std::string(call_id));
    return req;
  }

  // Constant after construction.
  const std::string endpoint_;
  const SandboxClientOptions options_;
  std::mutex mu_;
  std::shared_ptr<v1::Sandbox::Stub> stub_;  // null: dial on the next call; guarded by mu_
  std::atomic<bool> redial_{false};  // set by ExecuteAsync's callback; Stub() acts on it
};

}  // namespace

Result<std::unique_ptr<SandboxClient>> SandboxClient::Connect(std::string endpoint,
                                                              SandboxClientOptions options) {
  if (endpoint.empty()) return Status::InvalidArgument("sandbox endpoint is empty");
  auto client = std::make_unique<GrpcSandboxClient>(std::move(endpoint), std::move(options));
  SINEW_RETURN_IF_ERROR(client->Dial());
  return std::unique_ptr<SandboxClient>(std::move(client));
}

Result<std::unique_ptr<SandboxClient>> SandboxClient::ConnectTo(const v1::SandboxInfo& info,
                                                                SandboxClientOptions options) {
  options.sandbox_id = info.id();
  options.secret = info.agent_secret();
  options.expected_uid = info.host_uid();
  return Connect(info.endpoint(), std::move(options));
}

}  // namespace sinew::sandbox
