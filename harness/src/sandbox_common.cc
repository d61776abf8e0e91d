#include "sandbox_common.h"

#include <boost/json.hpp>
#include <chrono>
#include <thread>

#include "sinew/json_fields.h"
#include "sinew/proto_json.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;
using json_fields::StringField;
using json_fields::UintField;

std::string OutcomeName(v1::SandboxOutcome outcome) {
  switch (outcome) {
    case v1::SANDBOX_OUTCOME_OOM:
      return "oom";
    case v1::SANDBOX_OUTCOME_LIFETIME:
      return "lifetime";
    case v1::SANDBOX_OUTCOME_EXITED:
      return "exited";
    case v1::SANDBOX_OUTCOME_DESTROYED:
      return "destroyed";
    default:
      return "crashed";
  }
}

}  // namespace

SandboxSpec ParseSandboxSpec(const std::string& spec_json) {
  SandboxSpec spec;
  if (spec_json.empty()) return spec;
  boost::system::error_code ec;
  json::value v = json::parse(spec_json, ec);
  if (ec || !v.is_object()) return spec;
  const auto& o = v.as_object();
  if (auto a = o.find("attach"); a != o.end() && a->value().is_object()) {
    spec.attach = true;
    spec.attach_id = StringField(a->value().as_object(), "id");
    spec.attach_endpoint = StringField(a->value().as_object(), "endpoint");
    return spec;
  }
  v1::Resources& r = spec.resources;
  r.set_cpu_millicores(static_cast<uint32_t>(UintField(o, "cpu_millis")));
  r.set_memory_guaranteed_bytes(UintField(o, "memory_bytes"));
  r.set_memory_limit_bytes(UintField(o, "memory_limit_bytes"));
  r.set_pids_limit(static_cast<uint32_t>(UintField(o, "pids")));
  r.set_workspace_bytes(UintField(o, "disk_bytes"));
  r.set_lifetime_seconds(static_cast<uint32_t>(UintField(o, "lifetime_seconds")));
  r.set_network(StringField(o, "network"));
  r.set_image(StringField(o, "image"));
  r.set_runtime(StringField(o, "runtime"));  // "runc" or "runsc"
  return spec;
}

Task<Result<v1::SandboxInfo>> ProvisionOn(sandbox::ProvisionerClient& provisioner, const v1::Resources& resources,
                                          const std::string& label) {
  co_return co_await AwaitCallback<Result<v1::SandboxInfo>>(
      [&](std::function<void(Result<v1::SandboxInfo>)> done) {
        provisioner.ProvisionAsync(resources, label, std::move(done));
      });
}

Result<v1::SnapshotInfo> SnapshotSessionSandbox(SandboxBackend& sandboxes, const SandboxRef& box) {
  SINEW_ASSIGN_OR_RETURN(sandbox::ProvisionerClient * prov, sandboxes.ProvisionerAt(box.host_address));
  return prov->Snapshot(box.id, /*owner=*/"");
}

Result<v1::SnapshotInfo> DeleteSessionSnapshot(SandboxBackend& sandboxes, const std::string& host_address,
                                               const std::string& snapshot_id) {
  SINEW_ASSIGN_OR_RETURN(sandbox::ProvisionerClient * prov, sandboxes.ProvisionerAt(host_address));
  return prov->DeleteSnapshot(snapshot_id, /*owner=*/"");
}

SandboxBackend::Provisioned ToProvisioned(const v1::SandboxInfo& info) {
  SandboxBackend::Provisioned p;
  p.id = info.id();
  p.endpoint = info.endpoint();
  p.provision_ms = info.provision_ms();
  p.from_warm_pool = info.from_warm_pool();
  p.resources_json = ProtoJsonLine(info.resources());
  return p;
}

Result<SandboxBackend::Provisioned> CheckAttached(const v1::SandboxInfo& info,
                                                  const SandboxSpec& spec) {
  if (info.state() != v1::SANDBOX_STATE_READY || info.endpoint() != spec.attach_endpoint) {
    return Status::FailedPrecondition("the attached sandbox " + spec.attach_id + " is not running");
  }
  auto p = ToProvisioned(info);
  p.provision_ms = 0;
  p.from_warm_pool = false;
  return p;
}

ToolOutcome ToOutcome(const v1::ExecuteResult& result) {
  ToolOutcome o;
  o.output = result.output();
  o.is_error = result.is_error();
  o.exit_status = result.exit_code();
  o.signal = result.signal();
  o.timed_out = result.timed_out();
  o.truncated = result.truncated();
  o.duration_ms = result.duration_ms();
  return o;
}

std::pair<std::string, std::string> AskHowItEnded(sandbox::ProvisionerClient& provisioner,
                                                  const std::string& id) {
  auto info = provisioner.Get(id);
  // sandboxd records the end (an OOM kill, a crash) a moment after the agent's link
  // breaks: give it up to 2 s.
  for (int i = 0; i < 40 && info.ok() && info->state() != v1::SANDBOX_STATE_ENDED; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    info = provisioner.Get(id);
  }
  if (!info.ok()) return {"crashed", info.status().message()};
  if (info->state() != v1::SANDBOX_STATE_ENDED) {
    return {"crashed", "the sandbox's agent stopped answering (state " +
                           std::to_string(static_cast<int>(info->state())) + ")"};
  }
  return {OutcomeName(info->outcome()), info->outcome_detail()};
}

sandbox::SandboxClient* SandboxClients::Find(const std::string& sandbox_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(sandbox_id);
  if (it == entries_.end()) return nullptr;
  if (it->second.broken->load()) {
    entries_.erase(it);
    return nullptr;
  }
  return it->second.client.get();
}

sandbox::SandboxClient* SandboxClients::Put(const std::string& sandbox_id,
                                            std::unique_ptr<sandbox::SandboxClient> client) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& entry = entries_[sandbox_id];
  entry = Entry{std::move(client)};
  return entry.client.get();
}

void SandboxClients::Forget(const std::string& sandbox_id) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.erase(sandbox_id);
}

void SandboxClients::ExecuteAsync(const std::string& sandbox_id, const std::string& call_id,
                                  const std::string& name, const std::string& input_json,
                                  SandboxBackend::ExecuteDone done) {
  sandbox::SandboxClient* client = nullptr;
  std::shared_ptr<std::atomic<bool>> broken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(sandbox_id);
    if (it != entries_.end()) {
      client = it->second.client.get();
      broken = it->second.broken;
    }
  }
  if (client == nullptr) return done(Status::Unavailable("no client for sandbox " + sandbox_id));
  client->ExecuteAsync(name, input_json, call_id,
                       [broken, done = std::move(done)](Result<v1::ExecuteResult> result) {
                         if (!result.ok()) {
                           broken->store(true);
                           return done(result.status());
                         }
                         done(ToOutcome(*result));
                       });
}

Status SandboxClients::CancelCall(const std::string& sandbox_id, const std::string& call_id) {
  sandbox::SandboxClient* client = Find(sandbox_id);
  if (client == nullptr) return Status::Unavailable("no client for sandbox " + sandbox_id);
  return client->CancelCall(call_id).status();
}

}  // namespace sinew::harness
