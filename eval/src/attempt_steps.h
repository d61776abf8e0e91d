// The steps of one trial attempt in its sandbox (see runner.h for the sequence).
// Internal to the eval library.
#pragma once

#include <functional>
#include <string>

#include "sinew/eval/job.h"
#include "sinew/eval/resource_config.h"
#include "sinew/eval/task.h"
#include "sinew/sandbox/provisioner_client.h"

namespace sinew::eval {

struct AttemptContext {
  sandbox::ProvisionerClient* provisioner = nullptr;
  std::string label;                                   // sandbox label
  std::function<void(const std::string&)> on_sandbox;  // called once provisioned (journal)
  std::function<void(const std::string&)> on_session;  // called once a session exists
  std::string agent;                                   // harness | oracle | nop
  std::string model;                                   // agent harness ("" = default)
  std::string server, api_key;                         // the harness (every agent)
};

// Runs every step and fills `r` (outcome, cause, timings, usage). Never throws; every
// failure becomes an outcome.
void RunAttemptSteps(const Task& task, const SandboxShape& shape, const AttemptContext& ctx,
                     TrialRecord* r);

// Base64 of `data` (RFC 4648, with padding).
std::string Base64(const std::string& data);

}  // namespace sinew::eval
