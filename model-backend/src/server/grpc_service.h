// GrpcModelService: sinew.v1.ModelService/Generate (proto/model.proto) over the same
// ModelRunner and JobQueue as the HTTP API.
//
// Thread-safety: gRPC calls Generate from its own threads; each call waits for its job.
#pragma once

#include "job_queue.h"
#include "metrics.h"
#include "model_runner.h"
#include "sinew/proto/model.grpc.pb.h"

namespace sinew::model {

// Validates `request` into a GenerationRequest. Errors: InvalidArgument, NotFound
// (unknown model).
[[nodiscard]] Result<GenerationRequest> FromProto(const sinew::v1::GenerateRequest& request,
                                                  const std::string& model_id);

class GrpcModelService final : public sinew::v1::ModelService::Service {
 public:
  // REQUIRES: the arguments outlive the service and its calls.
  GrpcModelService(ModelRunner& runner, Metrics& metrics, JobQueue& queue)
      : runner_(runner), metrics_(metrics), queue_(queue) {}

  grpc::Status Generate(grpc::ServerContext* context, const sinew::v1::GenerateRequest* request,
                        grpc::ServerWriter<sinew::v1::GenerateResponse>* writer) override;

 private:
  ModelRunner& runner_;
  Metrics& metrics_;
  JobQueue& queue_;
};

}  // namespace sinew::model
