// SandboxApi: what is done with a sandbox once it exists: execute a tool in it,
// snapshot, fork, pause and resume (thin calls to sinew-sandboxd on its host).
#include <spdlog/spdlog.h>

#include "api_sandbox_json.h"
#include "api_sandboxes.h"
#include "json_util.h"
#include "sinew/json_fields.h"
#include "sinew/sandbox/provisioner_client.h"
#include "sinew/sandbox/sandbox_client.h"
#include "sinew/sandbox/tool_specs.h"
#include "sinew/utf8.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;
using json_fields::ParseObject;
using json_fields::ReadObject;
using json_fields::ReadString;
using json_fields::ReadUint32;
using json_fields::RejectUnknownKeys;

// The largest part of a call's input an audit record keeps (a record holds 16 KiB).
constexpr size_t kAuditInputBytes = 4096;
constexpr uint32_t kMaxForks = 16;

ApiResponse Json(int status, json::object body) {
  ApiResponse r;
  r.status = status;
  r.body = json::serialize(body);
  return r;
}

bool IsCallId(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.' || c == ':';
    if (!ok) return false;
  }
  return true;
}

bool IsSandboxTool(const std::string& name) {
  for (const auto& spec : sandbox::kSandboxToolSpecs) {
    if (spec.name == name) return true;
  }
  return false;
}

struct ExecuteBody {
  std::string name;
  std::string input_json = "{}";
  std::string call_id;
};

Result<ExecuteBody> ParseExecute(const std::string& text) {
  SINEW_ASSIGN_OR_RETURN(json::object body, ParseObject(text, "request body"));
  SINEW_RETURN_IF_ERROR(RejectUnknownKeys(body, "name,input,call_id", "body"));
  ExecuteBody out;
  SINEW_RETURN_IF_ERROR(json_fields::Require(body, "name", "body"));
  SINEW_RETURN_IF_ERROR(ReadString(body, "name", "body", &out.name));
  if (!IsSandboxTool(out.name)) {
    std::string names;
    for (const auto& spec : sandbox::kSandboxToolSpecs)
      names += (names.empty() ? "" : ", ") + std::string(spec.name);
    return Status::InvalidArgument("body.name '" + out.name + "' is not a sandbox tool; one of " +
                                   names);
  }
  const json::object* input = nullptr;
  SINEW_RETURN_IF_ERROR(ReadObject(body, "input", "body", &input));
  if (input != nullptr) out.input_json = json::serialize(*input);
  SINEW_RETURN_IF_ERROR(ReadString(body, "call_id", "body", &out.call_id));
  if (json_fields::Has(body, "call_id") && !IsCallId(out.call_id)) {
    return Status::InvalidArgument("body.call_id must be 1-128 characters of [A-Za-z0-9._:-]");
  }
  return out;
}

ApiResponse CallRefusal(const Status& s) {
  if (s.code() == StatusCode::kResourceExhausted)
    return ApiHandler::Error(409, "conflict", s.message());
  return ApiHandler::FromStatus(s);
}

}  // namespace

std::optional<ApiResponse> SandboxApi::NotReady(const SandboxRecord& record) {
  if (record.state == "ready") return std::nullopt;
  std::string why = "sandbox " + record.id + " is " + record.state;
  if (record.state == "paused")
    why += "; resume it first (POST /v1/sandboxes/" + record.id + "/resume)";
  if (!record.reason.empty()) why += " (" + record.reason + ")";
  return ApiHandler::Error(409, "conflict", why);
}

ApiResponse SandboxApi::Unreachable(const SandboxRecord& record, const Status& failure) {
  ForgetClient(record.sandbox_id);
  SandboxRecord now = Reconciled(record, nullptr);
  if (now.state != "ready") return *NotReady(now);
  return ApiHandler::Error(503, "unavailable", "the sandbox did not answer: " + failure.message());
}

namespace {

// True when the client asks for the call's output as it comes (Accept: text/event-stream).
bool WantsEvents(const ApiRequest& r) { return r.accept.find("text/event-stream") != std::string::npos; }

// The output of one stream (stdout or stderr) as events of whole UTF-8 characters: a
// chunk that ends inside a character keeps its tail for the next one.
class OutputEvents {
 public:
  OutputEvents(std::string name, const ApiResponse::EventSender& send) : name_(std::move(name)), send_(send) {}
  void Add(std::string_view bytes) {
    pending_.append(bytes);
    const size_t whole = Utf8Prefix(pending_, pending_.size()).size();
    if (whole == 0) return;
    Send(pending_.substr(0, whole));
    pending_.erase(0, whole);
  }
  void Flush() {
    if (!pending_.empty()) Send(pending_);
    pending_.clear();
  }

 private:
  void Send(std::string_view bytes) {
    send_("output", json::serialize(json::object{{"stream", name_}, {"text", SanitizeUtf8(bytes)}}));
  }
  const std::string name_;
  const ApiResponse::EventSender& send_;
  std::string pending_;
};

}  // namespace

ApiResponse SandboxApi::Execute(const ApiRequest& r, const std::string& id, const Caller& caller) {
  auto record = records_.Get(id, caller.tenant);
  if (!record.ok()) return ApiHandler::FromStatus(record.status());
  auto body = ParseExecute(r.body);
  if (!body.ok()) return ApiHandler::FromStatus(body.status());
  if (auto refused = NotReady(*record)) return *refused;
  // Written before the call runs: no command leaves no trace.
  std::string input = body->input_json.substr(0, kAuditInputBytes);
  if (input.size() < body->input_json.size())
    input += "... (" + std::to_string(body->input_json.size()) + " bytes)";
  const std::string detail =
      body->name + (body->call_id.empty() ? "" : " call_id " + body->call_id) + " input " + input;
  if (Status s = Audit(r, caller, id, "sandbox_execute", detail); !s.ok())
    return ApiHandler::FromStatus(s);
  auto client = ClientFor(*record);
  if (client.ok() && WantsEvents(r)) {
    return ExecuteEvents(*record, body->name, body->input_json, body->call_id, *client);
  }
  Result<v1::ExecuteResult> result =
      client.ok() ? (*client)->Execute(body->name, body->input_json, body->call_id)
                  : Result<v1::ExecuteResult>(client.status());
  if (!result.ok()) {
    // The same call id with another call is the caller's mistake; anything else may be
    // the sandbox's end.
    if (result.status().code() == StatusCode::kInvalidArgument) {
      return ApiHandler::Error(409, "conflict", result.status().message());
    }
    return Unreachable(*record, result.status());
  }
  return Json(200, json::object{{"result", ExecuteResultToJson(*result)}});
}

ApiResponse SandboxApi::ExecuteEvents(const SandboxRecord& record, const std::string& name,
                                      const std::string& input_json, const std::string& call_id,
                                      std::shared_ptr<sandbox::SandboxClient> client) {
  ApiResponse response;
  response.content_type = "text/event-stream";
  response.events = [this, record, name, input_json, call_id, client](const ApiResponse::EventSender& send) {
    OutputEvents out("stdout", send), err("stderr", send);
    auto result = client->ExecuteStream(
        name, input_json, [&](bool is_stderr, std::string_view bytes) { (is_stderr ? err : out).Add(bytes); },
        call_id);
    out.Flush();
    err.Flush();
    if (result.ok()) {
      send("result", json::serialize(json::object{{"result", ExecuteResultToJson(*result)}}));
      return;
    }
    // The answer is under way (200): the failure is its last event, as the JSON answer's
    // error would have been.
    const ApiResponse refusal = result.status().code() == StatusCode::kInvalidArgument
                                    ? ApiHandler::Error(409, "conflict", result.status().message())
                                    : Unreachable(record, result.status());
    send("error", refusal.body);
  };
  return response;
}

ApiResponse SandboxApi::Snapshot(const ApiRequest& r, const std::string& id, const Caller& caller) {
  auto record = records_.Get(id, caller.tenant);
  if (!record.ok()) return ApiHandler::FromStatus(record.status());
  if (auto refused = NotReady(*record)) return *refused;
  auto prov = deps_.sandboxes->ProvisionerAt(record->host_address);
  if (!prov.ok()) return ApiHandler::FromStatus(prov.status());
  if (auto refused = SnapshotRoom(caller.tenant)) return *refused;
  auto snap = (*prov)->Snapshot(record->sandbox_id, caller.tenant);
  if (!snap.ok()) return CallRefusal(snap.status());
  if (Status s = Audit(r, caller, id, "sandbox_snapshot", "snapshot " + snap->id()); !s.ok()) {
    spdlog::warn("sandbox {}: its snapshot is not in the audit log: {}", id, s.ToString());
  }
  return Json(201, json::object{{"snapshot", SnapshotToJson(*snap, id)}});
}

ApiResponse SandboxApi::Fork(const ApiRequest& r, const std::string& id, const Caller& caller) {
  auto record = records_.Get(id, caller.tenant);
  if (!record.ok()) return ApiHandler::FromStatus(record.status());
  uint32_t n = 1;
  if (!r.body.empty()) {
    auto body = ParseObject(r.body, "request body");
    if (!body.ok()) return ApiHandler::FromStatus(body.status());
    Status s = RejectUnknownKeys(*body, "n", "body");
    if (s.ok()) s = ReadUint32(*body, "n", "body", &n);
    if (!s.ok()) return ApiHandler::FromStatus(s);
    if (n < 1 || n > kMaxForks) {
      return ApiHandler::Error(400, "invalid_argument",
                               "body.n must be between 1 and " + std::to_string(kMaxForks));
    }
  }
  if (auto refused = NotReady(*record)) return *refused;
  auto prov = deps_.sandboxes->ProvisionerAt(record->host_address);
  if (!prov.ok()) return ApiHandler::FromStatus(prov.status());
  if (auto refused = SnapshotRoom(caller.tenant)) return *refused;
  // The children take the source's resources (its snapshot's).
  const SandboxUse each = UseOf(record->resources_json);
  const Ask ask{n, SandboxUse{each.memory_bytes * n, each.cpu_millis * n}};
  if (auto refused = Admit(caller.tenant, ask)) return *refused;
  v1::ForkRequest req;
  req.set_sandbox_id(record->sandbox_id);
  req.set_n(n);
  req.set_owner(caller.tenant);
  req.set_label("sandbox-api " + caller.tenant);
  auto forked = (*prov)->Fork(req);
  if (!forked.ok()) {
    Settle(caller.tenant, ask);
    return CallRefusal(forked.status());
  }
  json::array made;
  Status failed = Status::Ok();
  for (const auto& info : forked->sandboxes()) {
    NewSandboxRecord fresh{info.id(), record->host_id, record->host_address,
                           json::serialize(ResourcesToJson(info.resources())),
                           forked->snapshot().id()};
    auto child =
        failed.ok() ? records_.Create(caller.tenant, fresh) : Result<SandboxRecord>(failed);
    if (!child.ok()) {
      failed = child.status();
      (void)(*prov)->Destroy(info.id());  // without a record nobody could reach it
      continue;
    }
    (void)Audit(r, caller, child->id, "sandbox_create",
                "forked from sandbox " + id + " (" + forked->snapshot().id() + ")");
    made.push_back(SandboxToJson(*child));
  }
  Settle(caller.tenant, ask);
  if (!failed.ok()) return ApiHandler::FromStatus(failed);
  (void)Audit(r, caller, id, "sandbox_fork",
              std::to_string(n) + " forks from snapshot " + forked->snapshot().id());
  return Json(201, json::object{{"snapshot", SnapshotToJson(forked->snapshot(), id)},
                                {"sandboxes", std::move(made)}});
}

ApiResponse SandboxApi::PauseOrResume(const ApiRequest& r, const std::string& id,
                                      const Caller& caller, bool pause) {
  auto record = records_.Get(id, caller.tenant);
  if (!record.ok()) return ApiHandler::FromStatus(record.status());
  if (record->state != "ready" && record->state != "paused") return *NotReady(*record);
  auto prov = deps_.sandboxes->ProvisionerAt(record->host_address);
  if (!prov.ok()) return ApiHandler::FromStatus(prov.status());
  const std::string state = pause ? "paused" : "ready";
  // A pause keeps a snapshot; a resume holds memory and CPU again.
  Ask ask;
  if (record->state != state) {
    if (pause) {
      if (auto refused = SnapshotRoom(caller.tenant)) return *refused;
    } else {
      ask.use = UseOf(record->resources_json);
      if (auto refused = Admit(caller.tenant, ask)) return *refused;
    }
  }
  ForgetClient(record->sandbox_id);
  auto info = pause ? (*prov)->Pause(record->sandbox_id, caller.tenant)
                    : (*prov)->Resume(record->sandbox_id, caller.tenant);
  if (!info.ok()) {
    Settle(caller.tenant, ask);
    return CallRefusal(info.status());
  }
  SandboxRecord now = *record;
  if (record->state != state) {
    auto changed = records_.SetState(*record, state,
                                     pause ? "paused through the API" : "resumed through the API");
    Settle(caller.tenant, ask);
    if (!changed.ok()) return ApiHandler::FromStatus(changed.status());
    now = *changed;
    (void)Audit(r, caller, id, pause ? "sandbox_pause" : "sandbox_resume", "sandbox " + id);
  }
  json::object out = SandboxToJson(now);
  out["live"] = LiveToJson(*info);
  return Json(200, json::object{{"sandbox", std::move(out)}});
}

}  // namespace sinew::harness
