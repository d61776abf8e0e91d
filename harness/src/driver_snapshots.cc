// SessionDriver's sandboxes from snapshots (docs/harness.md, "Forks with their sandbox"):
// the copies a task with "snapshots" keeps of its sandbox (sandbox_snapshot events), and
// the provisioning of a session's sandbox, fresh or from a snapshot (a sub-agent's
// parent's, or a fork's source's).
#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>

#include "driver.h"
#include "sandbox_common.h"

namespace sinew::harness {

Task<Result<SandboxBackend::Provisioned>> SessionDriver::ProvisionSandbox(std::string* from_snapshot) {
  from_snapshot->clear();
  std::string snapshot = task_.parent.sandbox_snapshot;
  const bool fork = snapshot.empty() && !state_.next_sandbox_snapshot.empty();
  if (fork) snapshot = state_.next_sandbox_snapshot;
  if (snapshot.empty()) co_return co_await deps_.sandboxes->Provision(task_.sandbox_json, id_, *pools_.blocking);
  v1::ProvisionRequest request;
  // Zero fields take the snapshot's values; the spec is the source's, as the snapshot is.
  *request.mutable_resources() = ParseSandboxSpec(task_.sandbox_json).resources;
  request.set_label(id_);
  request.set_from_snapshot(snapshot);
  auto box = co_await Blocking([&] { return deps_.sandboxes->ProvisionBlocking(request); });
  if (box.ok()) {
    *from_snapshot = snapshot;
    co_return box;
  }
  if (!fork || box.status().code() != StatusCode::kNotFound) co_return box;
  // The source deleted it since (it keeps its newest kSessionSnapshotsKept): a fresh one.
  spdlog::warn("session {}: the snapshot {} of the session it was forked from is gone ({}); a fresh sandbox",
               id_, snapshot, box.status().message());
  co_return co_await deps_.sandboxes->Provision(task_.sandbox_json, id_, *pools_.blocking);
}

bool SessionDriver::SnapshotDue() const {
  return task_.snapshots != SnapshotPolicy::kNone && !state_.sandbox_id.empty() && !state_.sandbox_paused &&
         !AttachesSandbox(task_.sandbox_json) &&
         state_.sandbox_changed_seq > state_.sandbox_snapshot_seq;
}

Task<Status> SessionDriver::KeepSnapshot(const std::string& reason, const std::string& call_id) {
  const SandboxRef box = SandboxOf();
  const uint64_t at_seq = next_seq_ - 1;  // the sandbox as every event so far left it
  auto snap = co_await Blocking([&] {
    // Another snapshot of it may still be under way (one a dead driver asked for): it is
    // waited for, a few seconds at most.
    Result<v1::SnapshotInfo> taken = SnapshotSessionSandbox(*deps_.sandboxes, box);
    for (int tries = 0; tries < 50 && !taken.ok() && taken.status().code() == StatusCode::kFailedPrecondition &&
                        taken.status().message().find("under way") != std::string::npos;
         ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      taken = SnapshotSessionSandbox(*deps_.sandboxes, box);
    }
    return taken;
  });
  co_return co_await RecordSnapshot(reason, call_id, box, at_seq, snap);
}

Task<Status> SessionDriver::RecordSnapshot(const std::string& reason, const std::string& call_id,
                                           const SandboxRef& box, uint64_t at_seq,
                                           const Result<v1::SnapshotInfo>& snap) {
  if (!snap.ok()) {
    deps_.metrics->Add("sinew_harness_sandbox_snapshots_total", "outcome=\"error\"");
    spdlog::warn("session {}: sandbox {} not snapshotted ({}): {}", id_, box.id, reason, snap.status().message());
    co_return Status::Ok();
  }
  deps_.metrics->Add("sinew_harness_sandbox_snapshots_total", "outcome=\"ok\"");
  v1::Event ev;
  auto* s = ev.mutable_sandbox_snapshot();
  s->set_sandbox_id(box.id);
  s->set_snapshot_id(snap->id());
  s->set_reason(reason);
  s->set_at_seq(at_seq);
  s->set_call_id(call_id);
  s->set_data_bytes(snap->data_bytes());
  s->set_added_bytes(snap->added_bytes());
  s->set_duration_ms(snap->duration_ms());
  s->set_host_address(box.host_address);
  s->set_memory(snap->memory());
  std::vector<LogState::Snapshot> dropped;
  for (size_t i = 0; i + kSessionSnapshotsKept <= state_.snapshots.size(); ++i) {
    dropped.push_back(state_.snapshots[i]);
    s->add_dropped_snapshot_ids(state_.snapshots[i].id);
  }
  // Logged first, deleted after: a crash between the two leaves a snapshot nobody names
  // (kept by its host until deleted), never a log that names a deleted one as kept.
  Status logged = co_await AppendOne(std::move(ev));
  if (!logged.ok()) {
    (void)co_await Blocking([&] { return DeleteSessionSnapshot(*deps_.sandboxes, box.host_address, snap->id()); });
    co_return logged;
  }
  spdlog::info("session {}: sandbox {} snapshotted as {} ({}, {} bytes added, frozen {} ms)", id_, box.id,
               snap->id(), reason, snap->added_bytes(), snap->duration_ms());
  for (const auto& old : dropped) {
    auto deleted = co_await Blocking([&] { return DeleteSessionSnapshot(*deps_.sandboxes, old.host_address, old.id); });
    if (!deleted.ok() && deleted.status().code() != StatusCode::kNotFound) {
      spdlog::warn("session {}: its old snapshot {} was not deleted: {}", id_, old.id, deleted.status().message());
    }
  }
  co_return Status::Ok();
}

}  // namespace sinew::harness
