#include "sandboxd/provisioner_service.h"

#include "sinew/grpc_status.h"

namespace sinew::sandbox {
namespace {

grpc::Status Reply(Result<v1::SandboxInfo> r, v1::SandboxInfo* resp) {
  if (!r.ok()) return ToGrpcStatus(r.status());
  *resp = std::move(*r);
  return grpc::Status::OK;
}

Status CheckId(const std::string& id) {
  if (id.empty()) return Status::InvalidArgument("sandbox id is empty");
  if (id.size() > 64) return Status::InvalidArgument("sandbox id is too long");
  return Status::Ok();
}

}  // namespace

grpc::Status ProvisionerService::Provision(grpc::ServerContext*, const v1::ProvisionRequest* req,
                                           v1::SandboxInfo* resp) {
  if (req->label().size() > 256) return ToGrpcStatus(Status::InvalidArgument("label is longer than 256 bytes"));
  return Reply(manager_.Provision(req->resources(), req->label()), resp);
}

grpc::Status ProvisionerService::Destroy(grpc::ServerContext*, const v1::DestroyRequest* req, v1::SandboxInfo* resp) {
  if (Status s = CheckId(req->id()); !s.ok()) return ToGrpcStatus(s);
  return Reply(manager_.Destroy(req->id()), resp);
}

grpc::Status ProvisionerService::Get(grpc::ServerContext*, const v1::GetSandboxRequest* req, v1::SandboxInfo* resp) {
  if (Status s = CheckId(req->id()); !s.ok()) return ToGrpcStatus(s);
  return Reply(manager_.Get(req->id()), resp);
}

grpc::Status ProvisionerService::List(grpc::ServerContext*, const v1::ListSandboxesRequest* req,
                                      v1::ListSandboxesResponse* resp) {
  for (auto& info : manager_.List(req->include_ended())) *resp->add_sandboxes() = std::move(info);
  return grpc::Status::OK;
}

grpc::Status ProvisionerService::Health(grpc::ServerContext*, const v1::ProvisionerHealthRequest*, v1::ProvisionerHealthResponse* resp) {
  *resp = manager_.Health();
  return grpc::Status::OK;
}

}  // namespace sinew::sandbox
