#include "agent/agent_service.h"

namespace sinew::sandbox {

// Output streamed live per call; beyond it only the (capped) result is sent.
constexpr size_t kMaxStreamedBytes = 8u << 20;

grpc::Status AgentService::Execute(grpc::ServerContext* ctx, const v1::ExecuteRequest* req,
                                   v1::ExecuteResult* resp) {
  RunContext run;
  run.cancelled = [ctx] { return ctx->IsCancelled(); };
  *resp = registry_.Execute(req->name(), req->input_json(), run);
  return grpc::Status::OK;
}

grpc::Status AgentService::ExecuteStream(grpc::ServerContext* ctx, const v1::ExecuteRequest* req,
                                         grpc::ServerWriter<v1::ExecuteChunk>* writer) {
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
  RunContext run;
  run.sink = sink;
  run.cancelled = [ctx, &client_gone] { return client_gone || ctx->IsCancelled(); };
  v1::ExecuteChunk last;
  *last.mutable_result() = registry_.Execute(req->name(), req->input_json(), run);
  if (!client_gone) writer->Write(last);
  return grpc::Status::OK;
}

grpc::Status AgentService::ListTools(grpc::ServerContext*, const v1::ListToolsRequest*,
                                     v1::ListToolsResponse* resp) {
  for (auto& spec : registry_.Specs()) *resp->add_tools() = std::move(spec);
  return grpc::Status::OK;
}

}  // namespace sinew::sandbox
