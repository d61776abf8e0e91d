// SandboxBackend over the hands' client library (sinew-sandboxd + sinew-sandbox-agent).
#include <google/protobuf/util/json_util.h>

#include <boost/json.hpp>
#include <chrono>
#include <map>
#include <thread>

#include "sinew/sandbox/provisioner_client.h"
#include "sinew/sandbox/sandbox_client.h"
#include "tools.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;

uint64_t Field(const json::object& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end()) return 0;
  if (it->value().is_uint64()) return it->value().as_uint64();
  if (it->value().is_int64() && it->value().as_int64() > 0) return static_cast<uint64_t>(it->value().as_int64());
  return 0;
}

std::string OutcomeName(v1::SandboxOutcome outcome) {
  switch (outcome) {
    case v1::SANDBOX_OUTCOME_OOM: return "oom";
    case v1::SANDBOX_OUTCOME_LIFETIME: return "lifetime";
    case v1::SANDBOX_OUTCOME_EXITED: return "exited";
    case v1::SANDBOX_OUTCOME_DESTROYED: return "destroyed";
    default: return "crashed";
  }
}

class GrpcSandboxBackend final : public SandboxBackend {
 public:
  GrpcSandboxBackend(std::string address, std::unique_ptr<sandbox::ProvisionerClient> provisioner)
      : address_(std::move(address)), provisioner_(std::move(provisioner)) {}

  bool configured() const override { return provisioner_ != nullptr; }

  Result<Provisioned> Provision(const std::string& spec_json, const std::string& label) override {
    if (!provisioner_) return Status::Unavailable("no sandboxd configured (config.sandboxd.address)");
    v1::Resources r;
    if (!spec_json.empty()) {
      boost::system::error_code ec;
      json::value v = json::parse(spec_json, ec);
      if (!ec && v.is_object()) {
        const auto& o = v.as_object();
        if (auto a = o.find("attach"); a != o.end() && a->value().is_object()) return Attach(a->value().as_object());
        r.set_cpu_millicores(static_cast<uint32_t>(Field(o, "cpu_millis")));
        r.set_memory_guaranteed_bytes(Field(o, "memory_bytes"));
        r.set_memory_limit_bytes(Field(o, "memory_limit_bytes"));
        r.set_pids_limit(static_cast<uint32_t>(Field(o, "pids")));
        r.set_workspace_bytes(Field(o, "disk_bytes"));
        r.set_lifetime_seconds(static_cast<uint32_t>(Field(o, "lifetime_seconds")));
        if (auto n = o.find("network"); n != o.end() && n->value().is_string()) {
          r.set_network(std::string(n->value().as_string()));
        }
        if (auto i = o.find("image"); i != o.end() && i->value().is_string()) {
          r.set_image(std::string(i->value().as_string()));
        }
        if (auto rt = o.find("runtime"); rt != o.end() && rt->value().is_string()) {
          r.set_runtime(std::string(rt->value().as_string()));  // "runc" or "runsc"
        }
      }
    }
    SINEW_ASSIGN_OR_RETURN(v1::SandboxInfo info, provisioner_->Provision(r, label));
    Provisioned p;
    p.id = info.id();
    p.endpoint = info.endpoint();
    p.provision_ms = info.provision_ms();
    p.from_warm_pool = info.from_warm_pool();
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    (void)google::protobuf::util::MessageToJsonString(info.resources(), &p.resources_json, options);
    return p;
  }

  // An existing sandbox named by the task (an evaluation runner's): it must be running.
  Result<Provisioned> Attach(const json::object& a) {
    auto str = [&](const char* k) {
      auto* v = a.if_contains(k);
      return v && v->is_string() ? std::string(v->as_string()) : std::string();
    };
    SINEW_ASSIGN_OR_RETURN(v1::SandboxInfo info, provisioner_->Get(str("id")));
    if (info.state() != v1::SANDBOX_STATE_READY || info.endpoint() != str("endpoint")) {
      return Status::FailedPrecondition("the attached sandbox " + str("id") + " is not running");
    }
    Provisioned p;
    p.id = info.id();
    p.endpoint = info.endpoint();
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    (void)google::protobuf::util::MessageToJsonString(info.resources(), &p.resources_json, options);
    return p;
  }

  Result<ToolOutcome> Execute(const std::string& sandbox_id, const std::string& call_id,
                              const std::string& name, const std::string& input_json) override {
    SINEW_ASSIGN_OR_RETURN(sandbox::SandboxClient * client, ClientFor(sandbox_id));
    auto result = client->Execute(name, input_json, call_id);
    if (!result.ok()) {
      Forget(sandbox_id);
      return result.status();
    }
    ToolOutcome o;
    o.output = result->output();
    o.is_error = result->is_error();
    o.exit_status = result->exit_code();
    o.signal = result->signal();
    o.timed_out = result->timed_out();
    o.truncated = result->truncated();
    o.duration_ms = result->duration_ms();
    return o;
  }

  std::pair<std::string, std::string> HowItEnded(const std::string& id) override {
    if (!provisioner_) return {"crashed", "no sandboxd"};
    auto info = provisioner_->Get(id);
    // sandboxd records the end (an OOM kill, a crash) a moment after the agent's link
    // breaks: give it up to 2 s.
    for (int i = 0; i < 40 && info.ok() && info->state() != v1::SANDBOX_STATE_ENDED; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      info = provisioner_->Get(id);
    }
    if (!info.ok()) return {"crashed", info.status().message()};
    if (info->state() != v1::SANDBOX_STATE_ENDED) {
      return {"crashed", "the sandbox's agent stopped answering (state " +
                             std::to_string(static_cast<int>(info->state())) + ")"};
    }
    return {OutcomeName(info->outcome()), info->outcome_detail()};
  }

  Status Destroy(const std::string& id) override {
    Forget(id);
    if (!provisioner_) return Status::Ok();
    auto info = provisioner_->Destroy(id);
    if (!info.ok() && info.status().code() != StatusCode::kNotFound) return info.status();
    return Status::Ok();
  }

  Status Health() override {
    if (!provisioner_) return Status::Unavailable("no sandboxd configured");
    auto h = provisioner_->Health();
    if (!h.ok()) return h.status();
    if (!h->ok()) return Status::Unavailable("sandboxd is not healthy: " + h->detail());
    return Status::Ok();
  }

 private:
  // A client for the sandbox with this id: its endpoint, secret and uid come from the
  // provisioner (a harness that took a session over has only the id from the log).
  Result<sandbox::SandboxClient*> ClientFor(const std::string& sandbox_id) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = clients_.find(sandbox_id);
      if (it != clients_.end()) return it->second.get();
    }
    if (!provisioner_) return Status::Unavailable("no sandboxd configured (config.sandboxd.address)");
    SINEW_ASSIGN_OR_RETURN(v1::SandboxInfo info, provisioner_->Get(sandbox_id));
    if (info.state() == v1::SANDBOX_STATE_ENDED) {
      return Status::Unavailable("sandbox " + sandbox_id + " has ended");
    }
    SINEW_ASSIGN_OR_RETURN(auto client, sandbox::SandboxClient::ConnectTo(info));
    std::lock_guard<std::mutex> lock(mutex_);
    auto* raw = client.get();
    clients_[sandbox_id] = std::move(client);
    return raw;
  }
  void Forget(const std::string& sandbox_id) {
    std::lock_guard<std::mutex> lock(mutex_);
    clients_.erase(sandbox_id);
  }

  const std::string address_;
  const std::unique_ptr<sandbox::ProvisionerClient> provisioner_;  // null: not configured
  std::mutex mutex_;
  // Clients are never erased while a call uses them: a session's calls are sequential.
  std::map<std::string, std::unique_ptr<sandbox::SandboxClient>> clients_;  // guarded by mutex_
};

}  // namespace

std::unique_ptr<SandboxBackend> SandboxBackend::Create(const std::string& address, const GrpcTlsOptions& tls) {
  std::unique_ptr<sandbox::ProvisionerClient> provisioner;
  if (!address.empty()) {
    auto p = sandbox::ProvisionerClient::Connect(address, std::chrono::minutes(2), tls);
    if (p.ok()) provisioner = std::move(p).value();
  }
  return std::make_unique<GrpcSandboxBackend>(address, std::move(provisioner));
}

}  // namespace sinew::harness
