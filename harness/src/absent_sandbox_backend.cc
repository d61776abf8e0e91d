// Built when the hands' client library is absent: sandbox tools fail clearly.
#include "api_handler.h"
#include "sandbox_backend.h"

namespace sinew::harness {
namespace {

class AbsentBackend final : public SandboxBackend {
 public:
  Task<Result<Provisioned>> Provision(const std::string&, const std::string&, asio::thread_pool&) override {
    co_return Status::Unimplemented("this harness was built without the sandbox client library");
  }
  Status Connect(const SandboxRef&) override {
    return Status::Unimplemented("this harness was built without the sandbox client library");
  }
  void ExecuteAsync(const SandboxRef& sandbox, const std::string&, const std::string&, const std::string&,
                    ExecuteDone done) override {
    done(Connect(sandbox));
  }
  std::pair<std::string, std::string> HowItEnded(const SandboxRef&) override {
    return {"crashed", "no sandbox client"};
  }
  Status Destroy(const SandboxRef&) override { return Status::Ok(); }
  Status Health() override { return Status::Unimplemented("built without the sandbox client"); }
  bool configured() const override { return false; }
};

}  // namespace

SandboxRoutes MakeSandboxRoutes(const HarnessDeps*) {
  return [](const ApiRequest&, const Caller&, const std::vector<std::string>&, const std::string&) {
    return ApiHandler::Error(503, "unavailable", "this harness was built without the sandbox client library");
  };
}

std::unique_ptr<SandboxBackend> SandboxBackend::Create(const std::string&, const GrpcTlsOptions&, std::chrono::seconds) {
  return std::make_unique<AbsentBackend>();
}

Result<std::unique_ptr<SandboxBackend>> SandboxBackend::CreateForEtcd(const std::string&, const GrpcTlsOptions&,
                                                                      const GrpcTlsOptions&, std::chrono::seconds) {
  return Status::Unimplemented("this harness was built without the sandbox client library");
}

}  // namespace sinew::harness
