// SessionStore: the append-only event log of every Sinew session.
//
// Each session is an ordered log of sinew.v1.Event with sequence numbers 1, 2, 3, ...
// Nothing appended is ever rewritten or deleted. Appends are fenced twice: the caller
// names the sequence number it expects the first new event to get, and the epoch of the
// lease it holds; a stale writer is refused and writes nothing.
//
// Two implementations share this interface:
//   OpenSessionStore()    embedded, over a RocksDB directory (one process owns it);
//   ConnectSessionStore() remote, over gRPC to a `sinew-store` server.
//
// Thread-safety: every method of a SessionStore may be called from many threads at once.
// An EventWatcher is used by one thread at a time, except Cancel(), which any thread may call
// (and the `ready` callback of OnReady, which runs on whichever thread notices).
// Errors: every method leaves stored data unchanged when it returns an error.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "sinew/proto/events.pb.h"
#include "sinew/proto/session_store.pb.h"
#include "sinew/grpc_tls_options.h"
#include "sinew/status.h"

namespace sinew::store {

enum class Durability {
  // An append is acknowledged only after its WAL record is synced to disk. Concurrent
  // appends share one sync (group commit). Survives process and machine crashes.
  kSync,
  // The WAL record is written to the OS but not synced. Survives a process crash, not a
  // machine crash (the last few appends may be lost).
  kAsync,
};

struct StoreOptions {
  // Default: kSync
  Durability durability = Durability::kSync;
  // The largest serialized event accepted by Append. Default: 4 MiB
  size_t max_event_bytes = 4u << 20;
  // The most events one Append may carry. Default: 1000
  size_t max_events_per_append = 1000;
  // Create the directory and database when missing. Default: true
  bool create_if_missing = true;
  // Open without taking the write lock; every mutating call fails. Default: false
  bool read_only = false;
};

// Streams a session's events from a position, waiting for new ones as they are appended.
class EventWatcher {
 public:
  virtual ~EventWatcher() = default;
  // Waits up to `timeout` for the next event. Returns true and fills *out when one came,
  // false on timeout. An error (unknown session, corruption, cancelled) ends the watch.
  [[nodiscard]] virtual Result<bool> Next(v1::Event* out, std::chrono::milliseconds timeout) = 0;
  // Makes a pending and every later Next() return kCancelled. Safe from any thread.
  virtual void Cancel() = 0;
  // Arranges one call of `ready` once Next would return without waiting: an event is
  // there, the watch ended or failed, or Cancel was called. It may run before OnReady
  // returns, and on any thread, possibly under the store's locks: it must be quick and
  // must not call the store (post to an executor, notify). A second OnReady before the
  // first fired replaces it; destroying the watcher drops it unfired. Lets a caller wait
  // for events without holding a thread (the harness's event streams).
  virtual void OnReady(std::function<void()> ready) = 0;
};

// Who takes a lease: `owner` identifies the process (compared for renew and release);
// `url` is where it answers requests about the session (may be empty). GetSession reports
// both for the live lease, so that others can forward to the holder.
struct LeaseHolder {
  std::string owner;
  std::string url;
};

class SessionStore {
 public:
  virtual ~SessionStore() = default;

  // Creates a session whose event 1 is a session_created event. Returns its metadata.
  [[nodiscard]] virtual Result<v1::Session> CreateSession(const v1::CreateSessionRequest& req) = 0;

  // Returns a session's metadata (status, next_seq, lease epoch, ...) and, while one is
  // live, its lease (holder and URL).
  [[nodiscard]] virtual Result<v1::Session> GetSession(const std::string& session_id) = 0;

  // Lists sessions newest first, filtered by tenant and status, one page at a time.
  [[nodiscard]] virtual Result<v1::ListSessionsResponse> ListSessions(
      const v1::ListSessionsRequest& req) = 0;

  // Appends a status_change event at the end of the log (fenced by lease epoch only) and
  // returns the updated metadata.
  [[nodiscard]] virtual Result<v1::Session> SetStatus(const v1::SetStatusRequest& req) = 0;

  // Appends events atomically, with the metadata change, in one write batch.
  // REQUIRES: req.expected_next_seq equals the session's next_seq (else kFailedPrecondition);
  // req.lease_epoch equals the live lease's epoch; with no live lease it is 0, or the epoch
  // of an expired lease that nobody released or took since (else kAborted).
  // A repeated idempotency_key returns the first attempt's sequence numbers, writes nothing.
  [[nodiscard]] virtual Result<v1::AppendResponse> Append(const v1::AppendRequest& req) = 0;

  // Reads events [from_seq, to_seq] (to_seq 0: the end), at most `limit` of them.
  // Every append acknowledged before the call is visible (read-your-writes).
  // Errors: kNotFound (unknown session), kInvalidArgument (malformed id, to_seq < from_seq,
  // limit over 100000), kCorruption (a gap, or an event that does not decode).
  [[nodiscard]] virtual Result<v1::GetEventsResponse> GetEvents(
      const v1::GetEventsRequest& req) = 0;

  // Reads the events GetEvents reads for the same range and limit (limit 0 here means up
  // to 100000), as the bytes the store holds: events[i] is the serialized v1::Event with
  // seq first_seq + i, which the store neither decodes nor re-encodes (a remote store
  // sends them as they lie on disk). For callers that read long logs and decode each
  // event once, or lazily, with DecodeEvent.
  // A page ends early, before the event that would take it past max_bytes (but never
  // empty while the range holds an event); continue from first_seq + events_size() while
  // that is below min(to_seq + 1, next_seq). Visibility as GetEvents.
  // Errors: as GetEvents, and kInvalidArgument for max_bytes over 32 MiB. Stored values
  // are checked without decoding payloads: one whose envelope is malformed or whose seq
  // is not its position gives kCorruption; damage inside a payload surfaces in DecodeEvent.
  // Against a sinew-store older than this call (it answers UNIMPLEMENTED), the remote
  // client reads through GetEvents with the same slices, pages and errors; the bytes are
  // then re-encoded by the client, and damage is reported by GetEvents.
  [[nodiscard]] virtual Result<v1::ReadEventBytesResponse> ReadEventBytes(
      const v1::ReadEventBytesRequest& req) = 0;

  // Watches a session from `from_seq` (0 means 1): past events first, then new ones as
  // they are appended, without polling delay.
  [[nodiscard]] virtual Result<std::unique_ptr<EventWatcher>> Watch(const std::string& session_id,
                                                                    uint64_t from_seq) = 0;

  // Leases decide which process drives a session. An acquire after expiry or release
  // raises the epoch; an acquire while another owner holds a live lease fails with
  // kFailedPrecondition; the holder re-acquiring keeps its epoch and extends the lease.
  // Expiry lets another acquire; until one does (or the holder releases), the holder
  // still holds its epoch: it can renew and append, so that a slow holder is replaced
  // only by another process, never by its own lateness.
  [[nodiscard]] virtual Result<v1::Lease> AcquireLease(const std::string& session_id,
                                                       const LeaseHolder& holder,
                                                       std::chrono::milliseconds ttl) = 0;
  // Extends the lease `owner` holds at `epoch`, expired or not. kAborted when it was
  // released or another acquired it since.
  [[nodiscard]] virtual Result<v1::Lease> RenewLease(const std::string& session_id,
                                                     const std::string& owner, uint64_t epoch,
                                                     std::chrono::milliseconds ttl) = 0;
  [[nodiscard]] virtual Status ReleaseLease(const std::string& session_id,
                                            const std::string& owner, uint64_t epoch) = 0;

  // Writes a consistent online copy of the store to `target_dir` (which must not exist),
  // usable as a store directory.
  [[nodiscard]] virtual Status Checkpoint(const std::string& target_dir) = 0;

  // The tenant audit log: access records kept per tenant, apart from every session's
  // event log (a read of a session records itself here, so the session is unchanged).
  // AppendAudit writes one record for session `req.session_id` (which need not exist in
  // this store) and returns it. Errors: kInvalidArgument (malformed session id, no
  // tenant or action, a record over 16 KiB).
  [[nodiscard]] virtual Result<v1::AuditRecord> AppendAudit(const v1::AppendAuditRequest& req) = 0;
  // Lists a tenant's records oldest first, one page at a time; a record written after a
  // page was read appears on a later page. Errors: kInvalidArgument (no tenant,
  // page_size over 1000, a page_token this store did not give).
  [[nodiscard]] virtual Result<v1::ListAuditResponse> ListAudit(const v1::ListAuditRequest& req) = 0;
};

// Opens (or creates) an embedded store over the RocksDB directory `dir`.
// Errors: kCorruption for a damaged directory, kIOError / kUnavailable when it is locked
// by another process, kInvalidArgument for a directory that is not a Sinew store.
[[nodiscard]] Result<std::unique_ptr<SessionStore>> OpenSessionStore(const std::string& dir,
                                                                     const StoreOptions& options);

struct RemoteOptions {
  // Deadline of each unary call. Default: 30 s
  std::chrono::milliseconds call_timeout{30000};
  // How long Connect waits for the server to answer Health. Default: 5 s
  std::chrono::milliseconds connect_timeout{5000};
  // Whether Connect waits for that answer; false connects lazily (calls then fail
  // kUnavailable at once while the server is down). Default: true
  bool wait_for_server = true;
  // mTLS to the server (docs/security.md). Default: none (plain gRPC)
  GrpcTlsOptions tls{};
};

// Connects to a `sinew-store` server at `address` (host:port) and checks that it answers.
[[nodiscard]] Result<std::unique_ptr<SessionStore>> ConnectSessionStore(
    const std::string& address, const RemoteOptions& options = {});

// Returns the payload name of an event ("tool_call", ...), or its `type` field when the
// payload is one this build does not know, or "" when it has neither.
std::string EventTypeName(const v1::Event& event);

// Returns "queued", "running", ... for a status.
std::string SessionStatusName(v1::SessionStatus status);

// Decodes one element of ReadEventBytesResponse.events, which must carry `seq`, into *out.
// Errors: kCorruption naming `seq` when the bytes are not an Event or carry another seq
// (*out is then unspecified).
[[nodiscard]] Status DecodeEvent(std::string_view bytes, uint64_t seq, v1::Event* out);

}  // namespace sinew::store
