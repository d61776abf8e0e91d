// SandboxBackend over one sinew-sandboxd (config.sandboxd.address) and the hands' client
// library. For many hosts placed through etcd see sandbox_hosts.cc.
#include "sandbox_common.h"
#include "sinew/sandbox/provisioner_client.h"
#include "sinew/sandbox/sandbox_client.h"
#include "sandbox_backend.h"

namespace sinew::harness {
namespace {

class GrpcSandboxBackend final : public SandboxBackend {
 public:
  GrpcSandboxBackend(std::string address, std::unique_ptr<sandbox::ProvisionerClient> provisioner)
      : address_(std::move(address)), provisioner_(std::move(provisioner)) {}

  bool configured() const override { return provisioner_ != nullptr; }

  Task<Result<Provisioned>> Provision(const std::string& spec_json, const std::string& label,
                                      asio::thread_pool& blocking) override {
    if (!provisioner_) co_return Status::Unavailable("no sandboxd configured (config.sandboxd.address)");
    const SandboxSpec spec = ParseSandboxSpec(spec_json);
    if (spec.attach) {
      // An existing sandbox named by the task (an evaluation runner's): it must be running.
      auto info = co_await OnPool(blocking, [&] { return provisioner_->Get(spec.attach_id); });
      if (!info.ok()) co_return info.status();
      co_return CheckAttached(*info, spec);
    }
    auto info = co_await ProvisionOn(*provisioner_, spec.resources, label);
    if (!info.ok()) co_return info.status();
    co_return ToProvisioned(*info);
  }

  Status Connect(const SandboxRef& sandbox) override { return ClientFor(sandbox.id).status(); }

  void ExecuteAsync(const SandboxRef& sandbox, const std::string& call_id, const std::string& name,
                    const std::string& input_json, ExecuteDone done) override {
    if (Status connected = Connect(sandbox); !connected.ok()) return done(connected);
    clients_.ExecuteAsync(sandbox.id, call_id, name, input_json, std::move(done));
  }

  Status CancelCall(const SandboxRef& sandbox, const std::string& call_id) override {
    SINEW_RETURN_IF_ERROR(Connect(sandbox));
    return clients_.CancelCall(sandbox.id, call_id);
  }

  std::pair<std::string, std::string> HowItEnded(const SandboxRef& sandbox) override {
    if (!provisioner_) return {"crashed", "no sandboxd"};
    return AskHowItEnded(*provisioner_, sandbox.id);
  }

  Status Destroy(const SandboxRef& sandbox) override {
    clients_.Forget(sandbox.id);
    if (!provisioner_) return Status::Ok();
    auto info = provisioner_->Destroy(sandbox.id);
    if (!info.ok() && info.status().code() != StatusCode::kNotFound) return info.status();
    return Status::Ok();
  }

  Status Pause(const SandboxRef& sandbox, bool if_idle) override {
    if (!provisioner_) return Status::Unavailable("no sandboxd configured");
    clients_.Forget(sandbox.id);  // the agent's connection ends with its container
    auto info = provisioner_->Pause(sandbox.id, /*owner=*/{}, if_idle);
    return info.ok() ? Status::Ok() : info.status();
  }

  Result<bool> Resume(const SandboxRef& sandbox) override {
    if (!provisioner_) return Status::Unavailable("no sandboxd configured");
    auto info = provisioner_->Resume(sandbox.id);
    if (!info.ok()) return info.status();
    return info->resumed_now();
  }

  Status Health() override {
    if (!provisioner_) return Status::Unavailable("no sandboxd configured");
    auto h = provisioner_->Health();
    if (!h.ok()) return h.status();
    if (!h->ok()) return Status::Unavailable("sandboxd is not healthy: " + h->detail());
    return Status::Ok();
  }

  Result<Provisioned> ProvisionBlocking(const v1::ProvisionRequest& request) override {
    if (!provisioner_) return Status::Unavailable("no sandboxd configured (config.sandboxd.address)");
    SINEW_ASSIGN_OR_RETURN(v1::SandboxInfo info, provisioner_->ProvisionWith(request));
    return ToProvisioned(info);
  }

  Result<sandbox::ProvisionerClient*> ProvisionerAt(const std::string&) override {
    if (!provisioner_) return Status::Unavailable("no sandboxd configured (config.sandboxd.address)");
    return provisioner_.get();
  }

  Result<std::vector<HostProvisioner>> AllProvisioners() override {
    if (!provisioner_) return Status::Unavailable("no sandboxd configured (config.sandboxd.address)");
    return std::vector<HostProvisioner>{HostProvisioner{"", "", provisioner_.get()}};
  }

 private:
  // A client for the sandbox with this id: its endpoint, secret and uid come from the
  // provisioner (a harness that took a session over has only the id from the log).
  Result<sandbox::SandboxClient*> ClientFor(const std::string& sandbox_id) {
    if (auto* known = clients_.Find(sandbox_id)) return known;
    if (!provisioner_) return Status::Unavailable("no sandboxd configured (config.sandboxd.address)");
    SINEW_ASSIGN_OR_RETURN(v1::SandboxInfo info, provisioner_->Get(sandbox_id));
    if (info.state() == v1::SANDBOX_STATE_ENDED) {
      return Status::Unavailable("sandbox " + sandbox_id + " has ended");
    }
    SINEW_ASSIGN_OR_RETURN(auto client, sandbox::SandboxClient::ConnectTo(info));
    return clients_.Put(sandbox_id, std::move(client));
  }

  const std::string address_;
  const std::unique_ptr<sandbox::ProvisionerClient> provisioner_;  // null: not configured
  SandboxClients clients_;
};

}  // namespace

std::unique_ptr<SandboxBackend> SandboxBackend::Create(const std::string& address, const GrpcTlsOptions& tls,
                                                      std::chrono::seconds provision_timeout) {
  std::unique_ptr<sandbox::ProvisionerClient> provisioner;
  if (!address.empty()) {
    auto p = sandbox::ProvisionerClient::Connect(address, std::chrono::minutes(2), tls, provision_timeout);
    if (p.ok()) provisioner = std::move(p).value();
  }
  return std::make_unique<GrpcSandboxBackend>(address, std::move(provisioner));
}

}  // namespace sinew::harness
