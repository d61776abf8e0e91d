// SandboxRecords: the durable record of each sandbox made through the sandbox API
// (/v1/sandboxes; docs/sandbox-api.md), kept in the session store so that every harness
// replica answers for every sandbox.
//
// A record is a session of the store under a tenant name of its own (RecordTenant: the
// caller's tenant behind a prefix no API key's tenant has), never leased: the session
// API does not see it (another tenant), and the harness's scanner leaves it alone (a
// session that is not queued and was never leased is a record, not work). Its metadata
// holds what never changes (sinew-sandboxd's id, the host, the resources); its status
// holds the state: running = ready, waiting_for_input = paused, failed = ended on its
// own (seen by a read), cancelled = deleted. A state change is a status_change event in
// its log.
//
// Thread-safety: every method may be called from many threads at once.
// Errors: the store's, unchanged; nothing is written on error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sinew/session_store/session_store.h"
#include "sinew/status.h"

namespace sinew::harness {

struct SandboxRecord {
  std::string id;          // the API's id: the record's session id (32 hex digits)
  std::string tenant;      // the caller's tenant (not the record's store tenant)
  std::string state;       // "ready", "paused", "ended", "deleted"
  std::string sandbox_id;  // sinew-sandboxd's id
  std::string host_id;     // "" with a single sinew-sandboxd
  std::string host_address;
  std::string resources_json;  // the resources as the provisioner filled them (proto JSON)
  std::string from_snapshot;   // "" when made fresh
  std::string reason;          // why it is in its state, when it ended or was deleted
  int64_t created_unix_ms = 0;
  int64_t updated_unix_ms = 0;
};

// What a new record holds (a provisioned sandbox).
struct NewSandboxRecord {
  std::string sandbox_id;
  std::string host_id;
  std::string host_address;
  std::string resources_json;
  std::string from_snapshot;
};

// The guaranteed memory and the CPU a sandbox holds while it is ready.
struct SandboxUse {
  uint64_t memory_bytes = 0;
  uint64_t cpu_millis = 0;
};
// The memory_bytes and cpu_millis of a record's resources_json (ResourcesToJson's names);
// 0 for what it lacks.
SandboxUse UseOf(const std::string& resources_json);

class SandboxRecords {
 public:
  // `store` is not owned and outlives this.
  explicit SandboxRecords(store::SessionStore* store) : store_(store) {}

  // The store tenant that holds `tenant`'s records.
  static std::string RecordTenant(const std::string& tenant);

  [[nodiscard]] Result<SandboxRecord> Create(const std::string& tenant,
                                             const NewSandboxRecord& sandbox);
  // The record `id` of `tenant`; kNotFound for a malformed id, an unknown one, or
  // another tenant's (indistinguishable).
  [[nodiscard]] Result<SandboxRecord> Get(const std::string& id, const std::string& tenant);
  // Moves `record` to `state` ("ready", "paused", "ended", "deleted") with `reason`;
  // returns it as stored after the change.
  [[nodiscard]] Result<SandboxRecord> SetState(const SandboxRecord& record,
                                               const std::string& state, const std::string& reason);

  struct Page {
    std::vector<SandboxRecord> records;  // newest first
    std::string next_page_token;         // "" at the end
  };
  // One page of `tenant`'s records, newest first; ended and deleted ones only with
  // `include_ended` (a page may then hold fewer than `limit`). `page_token`: the previous
  // page's next_page_token (kInvalidArgument for one the store did not give).
  [[nodiscard]] Result<Page> List(const std::string& tenant, uint32_t limit,
                                  const std::string& page_token, bool include_ended);
  // The tenant's records that are ready or paused, counted up to `stop_at`.
  [[nodiscard]] Result<uint64_t> CountLive(const std::string& tenant, uint64_t stop_at);
  // What the tenant's ready records hold (paused, ended and deleted ones hold nothing):
  // the sums of their resources.
  [[nodiscard]] Result<SandboxUse> ReadyUse(const std::string& tenant);
  // The creation times (unix ms) of the tenant's records made at or after `since_unix_ms`,
  // newest first.
  [[nodiscard]] Result<std::vector<int64_t>> CreatedSince(const std::string& tenant,
                                                          int64_t since_unix_ms);

 private:
  store::SessionStore* const store_;  // not owned
};

}  // namespace sinew::harness
