// What both sandbox backends (sandbox_tools.cc: one sinew-sandboxd; sandbox_hosts.cc:
// hosts placed through etcd) share: reading the task's "sandbox" object and turning the
// provisioner's answers into the harness's terms. Internal to the harness.
#pragma once

#include <string>
#include <utility>

#include "sinew/proto/sandbox.pb.h"
#include "sinew/sandbox/provisioner_client.h"
#include "tools.h"

namespace sinew::harness {

// The task's "sandbox" object (validated when the session was created; may be empty).
struct SandboxSpec {
  v1::Resources resources;  // zero fields: the host's defaults
  bool attach = false;      // {"attach": {"id", "endpoint"}}: an existing sandbox
  std::string attach_id;
  std::string attach_endpoint;
};
SandboxSpec ParseSandboxSpec(const std::string& spec_json);

// Provisioned from the provisioner's info (no host fields).
SandboxBackend::Provisioned ToProvisioned(const v1::SandboxInfo& info);
// An attached sandbox must be running at the endpoint the task named.
Result<SandboxBackend::Provisioned> CheckAttached(const v1::SandboxInfo& info,
                                                  const SandboxSpec& spec);
ToolOutcome ToOutcome(const v1::ExecuteResult& result);
// Asks `provisioner` how sandbox `id` ended, waiting up to 2 s for it to record the end.
std::pair<std::string, std::string> AskHowItEnded(sandbox::ProvisionerClient& provisioner,
                                                  const std::string& id);

}  // namespace sinew::harness
