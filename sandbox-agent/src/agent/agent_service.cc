#include "agent/agent_service.h"

#include "agent/file_transfer.h"

#include "sinew/grpc_status.h"

namespace sinew::sandbox {
namespace {

// Output streamed live per call; beyond it only the (capped) result is sent.
constexpr size_t kMaxStreamedBytes = 8u << 20;

}  // namespace

void AgentService::SetAuth(AgentAuth auth) {
  auto next = std::make_shared<const AgentAuth>(std::move(auth));
  std::lock_guard<std::mutex> lock(auth_mu_);
  auth_ = std::move(next);
}

grpc::Status AgentService::CheckAuth(grpc::ServerContext* ctx) const {
  std::shared_ptr<const AgentAuth> auth;
  {
    std::lock_guard<std::mutex> lock(auth_mu_);
    auth = auth_;
  }
  return auth->Check(ctx);
}

grpc::Status AgentService::Execute(grpc::ServerContext* ctx, const v1::ExecuteRequest* req,
                                   v1::ExecuteResult* resp) {
  if (grpc::Status s = CheckAuth(ctx); !s.ok()) return s;
  auto gone = [ctx] { return ctx->IsCancelled(); };
  if (!req->call_id().empty()) {
    auto r = calls_.Run(req->call_id(), req->name(), req->input_json(), nullptr, gone);
    if (!r.ok()) return ToGrpcStatus(r.status());
    *resp = std::move(r).value();
    return grpc::Status::OK;
  }
  RunContext run;
  run.cancelled = gone;
  *resp = registry_.Execute(req->name(), req->input_json(), run);
  return grpc::Status::OK;
}

grpc::Status AgentService::ExecuteStream(grpc::ServerContext* ctx, const v1::ExecuteRequest* req,
                                         grpc::ServerWriter<v1::ExecuteChunk>* writer) {
  if (grpc::Status s = CheckAuth(ctx); !s.ok()) return s;
  bool client_gone = false;
  size_t streamed = 0;
  auto sink = [&](bool is_stderr, std::string_view bytes) {
    if (client_gone || streamed >= kMaxStreamedBytes) return;
    streamed += bytes.size();
    if (streamed >= kMaxStreamedBytes) {
      bytes = bytes.substr(0, bytes.size() - (streamed - kMaxStreamedBytes));
    }
    v1::ExecuteChunk chunk;
    if (is_stderr) {
      chunk.set_stderr_bytes(std::string(bytes));
    } else {
      chunk.set_stdout_bytes(std::string(bytes));
    }
    client_gone = !writer->Write(chunk);
  };
  auto gone = [ctx, &client_gone] { return client_gone || ctx->IsCancelled(); };
  v1::ExecuteChunk last;
  if (!req->call_id().empty()) {
    auto r = calls_.Run(req->call_id(), req->name(), req->input_json(), sink, gone);
    if (!r.ok()) return ToGrpcStatus(r.status());
    *last.mutable_result() = std::move(r).value();
  } else {
    RunContext run;
    run.sink = sink;
    run.cancelled = gone;
    *last.mutable_result() = registry_.Execute(req->name(), req->input_json(), run);
  }
  if (!client_gone) writer->Write(last);
  return grpc::Status::OK;
}

grpc::Status AgentService::ListTools(grpc::ServerContext* ctx, const v1::ListToolsRequest*,
                                     v1::ListToolsResponse* resp) {
  if (grpc::Status s = CheckAuth(ctx); !s.ok()) return s;
  for (auto& spec : registry_.Specs()) *resp->add_tools() = std::move(spec);
  return grpc::Status::OK;
}

grpc::Status AgentService::CancelCall(grpc::ServerContext* ctx, const v1::CancelCallRequest* req,
                                      v1::CancelCallResponse* resp) {
  if (grpc::Status s = CheckAuth(ctx); !s.ok()) return s;
  if (req->call_id().empty()) return {grpc::StatusCode::INVALID_ARGUMENT, "call_id is required"};
  resp->set_running(calls_.Cancel(req->call_id()));
  return grpc::Status::OK;
}

grpc::Status AgentService::ReadFile(grpc::ServerContext* ctx, const v1::ReadFileRequest* req,
                                    grpc::ServerWriter<v1::FileChunk>* writer) {
  if (grpc::Status s = CheckAuth(ctx); !s.ok()) return s;
  Status s = SendFile(files_, req->path(), req->max_bytes(), [&](const v1::FileChunk& chunk) {
    return !ctx->IsCancelled() && writer->Write(chunk);
  });
  return ToGrpcStatus(s);
}

grpc::Status AgentService::WriteFile(grpc::ServerContext* ctx,
                                     grpc::ServerReader<v1::FileChunk>* reader,
                                     v1::WriteFileResult* resp) {
  if (grpc::Status s = CheckAuth(ctx); !s.ok()) return s;
  // The proof goes out before any byte is read: the client checks it before it sends one.
  reader->SendInitialMetadata();
  auto written = ReceiveFile(files_, [&](v1::FileChunk* chunk) { return reader->Read(chunk); });
  if (!written.ok()) return ToGrpcStatus(written.status());
  *resp = std::move(written).value();
  return grpc::Status::OK;
}

}  // namespace sinew::sandbox
