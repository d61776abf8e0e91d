// ApiHandler: interrupts (docs/harness.md, "Interrupts"). The interrupt is an interrupt
// event that the API appends straight to the session's log, with the log's next seq as
// the condition of the append (a driver's write in between makes it read again), before
// anything is cut: whichever driver holds the session then, or wakes it after a crash,
// answers it from the log. The driver is told at once: here through SessionControl, on
// another harness by a forwarded request that names the event's seq.
#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>

#include "api_handler.h"
#include "json_util.h"
#include "outgoing_http.h"
#include "sinew/json_fields.h"
#include "sinew/trace.h"
#include "sinew/utf8.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;
using json_fields::ParseObject;
using json_fields::ReadString;
using json_fields::RejectUnknownKeys;

constexpr size_t kMaxInterruptMessageBytes = 64 * 1024;

struct InterruptBody {
  std::string message;
  uint64_t interrupt_seq = 0;  // forwarded requests only: the event is in the log
};

Result<InterruptBody> ParseInterrupt(const std::string& text, bool forwarded) {
  SINEW_ASSIGN_OR_RETURN(json::object body, ParseObject(text, "request body"));
  SINEW_RETURN_IF_ERROR(
      RejectUnknownKeys(body, forwarded ? "message,interrupt_seq" : "message", "body"));
  InterruptBody out;
  SINEW_RETURN_IF_ERROR(ReadString(body, "message", "body", &out.message));
  if (out.message.empty()) {
    return Status::InvalidArgument(
        "body.message is required (a non-empty string: what the model is told)");
  }
  if (out.message.size() > kMaxInterruptMessageBytes) {
    return Status::InvalidArgument("body.message is over " +
                                   std::to_string(kMaxInterruptMessageBytes) + " bytes");
  }
  if (const json::value* seq = body.if_contains("interrupt_seq")) {
    if (!seq->is_int64() || seq->as_int64() <= 0) {
      return Status::InvalidArgument("body.interrupt_seq must be a positive integer");
    }
    out.interrupt_seq = static_cast<uint64_t>(seq->as_int64());
  }
  return out;
}

}  // namespace

ApiResponse ApiHandler::Interrupt(const ApiRequest& r, const std::string& id,
                                  const Caller& caller) {
  auto known = OwnedSession(id, caller.tenant);
  if (!known.ok()) return FromStatus(known.status());
  auto body = ParseInterrupt(r.body, r.forwarded);
  if (!body.ok()) return FromStatus(body.status());
  auto accepted = [&](const v1::Session& meta, uint64_t seq) {
    json::object s = SessionToJson(meta);
    ApiResponse out;
    out.status = 202;
    out.body = json::serialize(json::object{{"session", std::move(s)}, {"interrupt_seq", seq}});
    return out;
  };
  if (body->interrupt_seq != 0) {
    // Another harness wrote the event and tells the driver here about it.
    v1::GetEventsRequest req;
    req.set_session_id(id);
    req.set_from_seq(body->interrupt_seq);
    req.set_to_seq(body->interrupt_seq);
    req.set_limit(1);
    auto events = deps_.store->GetEvents(req);
    if (!events.ok()) return FromStatus(events.status());
    if (events->events_size() != 1 || !events->events(0).has_interrupt()) {
      return Error(409, "conflict",
                   "event " + std::to_string(body->interrupt_seq) + " of session " + id +
                       " is not an interrupt");
    }
    if (!control_->DeliverInterrupt(id, body->interrupt_seq)) control_->Wake(id);
    return accepted(*known, body->interrupt_seq);
  }
  // Read, check, append on condition that nothing came in between; else read again.
  for (int attempt = 0; attempt < 50; ++attempt) {
    auto meta = deps_.store->GetSession(id);
    if (!meta.ok()) return FromStatus(meta.status());
    if (IsTerminal(meta->status())) {
      return Error(409, "conflict",
                   "session " + id + " is already " + store::SessionStatusName(meta->status()) +
                       "; there is nothing to interrupt (send a message to continue it)");
    }
    v1::AppendRequest req;
    req.set_session_id(id);
    req.set_expected_next_seq(meta->next_seq());
    req.set_lease_epoch(meta->has_lease() ? meta->lease().epoch() : 0);
    auto* ev = req.add_events()->mutable_interrupt();
    ev->set_message(deps_.vault->Redact(SanitizeUtf8(body->message)));
    ev->set_key_id(caller.key_id);
    auto appended = deps_.store->Append(req);
    if (!appended.ok()) {
      const StatusCode code = appended.status().code();
      // The log moved (its driver wrote) or the lease changed hands: read again.
      if (code == StatusCode::kFailedPrecondition || code == StatusCode::kAborted) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5 + 5 * (attempt % 4)));
        continue;
      }
      return FromStatus(appended.status());
    }
    const uint64_t seq = appended->first_seq();
    spdlog::info("session {}: interrupt recorded at seq {}", id, seq);
    if (control_->DeliverInterrupt(id, seq)) return accepted(*meta, seq);
    const std::string holder = meta->has_lease() ? meta->lease().holder_url() : "";
    const bool elsewhere = (holder.rfind("http://", 0) == 0 || holder.rfind("https://", 0) == 0) &&
                           holder != deps_.config->advertise_url && !r.forwarded;
    if (elsewhere) {
      // Its driver there is told; if it does not answer, the interrupt waits in the log for
      // whichever driver takes the session over.
      HttpRequest fwd;
      fwd.method = "POST";
      fwd.url = holder + "/v1/sessions/" + id + "/interrupt";
      fwd.headers = {"Authorization: " + r.authorization, "Content-Type: application/json",
                     "X-Sinew-Forwarded: 1"};
      if (const std::string tp = OutgoingTraceparent(); !tp.empty())
        fwd.headers.push_back("traceparent: " + tp);
      fwd.body = json::serialize(json::object{{"message", body->message}, {"interrupt_seq", seq}});
      fwd.timeout_ms = 10000;
      fwd.tls.ca_file = deps_.config->tls.ca_file;
      auto told = PerformHttp(fwd);
      if (!told.ok() || told->status != 202) {
        spdlog::warn(
            "session {}: interrupt at seq {} recorded; its driver at {} was not told ({}); the "
            "next "
            "driver answers it",
            id, seq, holder,
            told.ok() ? "HTTP " + std::to_string(told->status) : told.status().message());
      }
    } else if (!(meta->imported() && meta->lease_epoch() == 0)) {
      control_->Wake(id);  // nobody drives it: a driver here answers it (a record stays a record)
    }
    return accepted(*meta, seq);
  }
  ApiResponse busy =
      Error(503, "unavailable",
            "session " + id + " changed under every try to record the interrupt; retry");
  busy.headers.emplace_back("Retry-After", "1");
  return busy;
}

}  // namespace sinew::harness
