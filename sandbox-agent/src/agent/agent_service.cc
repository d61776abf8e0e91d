#include "agent/agent_service.h"

namespace sinew::sandbox {

grpc::Status AgentService::Execute(grpc::ServerContext*, const v1::ExecuteRequest* req,
                                   v1::ExecuteResult* resp) {
  *resp = registry_.Execute(req->name(), req->input_json());
  return grpc::Status::OK;
}

grpc::Status AgentService::ExecuteStream(grpc::ServerContext*, const v1::ExecuteRequest* req,
                                         grpc::ServerWriter<v1::ExecuteChunk>* writer) {
  bool client_gone = false;
  auto sink = [&](bool is_stderr, std::string_view bytes) {
    if (client_gone) return;
    v1::ExecuteChunk chunk;
    if (is_stderr) {
      chunk.set_stderr_bytes(std::string(bytes));
    } else {
      chunk.set_stdout_bytes(std::string(bytes));
    }
    client_gone = !writer->Write(chunk);
  };
  v1::ExecuteChunk last;
  *last.mutable_result() = registry_.Execute(req->name(), req->input_json(), sink);
  if (!client_gone) writer->Write(last);
  return grpc::Status::OK;
}

grpc::Status AgentService::ListTools(grpc::ServerContext*, const v1::ListToolsRequest*,
                                     v1::ListToolsResponse* resp) {
  for (auto& spec : registry_.Specs()) *resp->add_tools() = std::move(spec);
  return grpc::Status::OK;
}

}  // namespace sinew::sandbox
