// Harness: the stateless brain. Serves the REST API (docs/harness-openapi.yaml) and
// drives sessions through the agent loop; everything it knows is in the session store,
// so any harness process can continue any session (Wake) after any crash.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <memory>
#include <string>

#include "sinew/harness/config.h"
#include "sinew/status.h"

namespace sinew::harness {

class Harness {
 public:
  virtual ~Harness() = default;

  // Connects to (or opens) the store, binds the REST listener, starts the workers, and
  // wakes every queued or running session that no live harness drives.
  [[nodiscard]] static Result<std::unique_ptr<Harness>> Start(const HarnessConfig& config);

  // The bound REST address, "127.0.0.1:PORT".
  virtual std::string address() const = 0;
  // This process's lease owner name.
  virtual std::string owner() const = 0;
  // Schedules wake(session_id): acquire the lease, rebuild from the log, continue.
  virtual void Wake(const std::string& session_id) = 0;
  // Stops listening and driving (leases are released); safe to call twice.
  virtual void Stop() = 0;
};

}  // namespace sinew::harness
