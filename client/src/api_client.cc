#include "sinew/client/api_client.h"

#include <google/protobuf/util/json_util.h>

#include <optional>

#include "sinew/http/url.h"
#include "sinew/json_fields.h"
#include "sinew/sse_parser.h"

namespace sinew::client {
namespace json = boost::json;
using json_fields::StringField;
using json_fields::UintField;

namespace {

std::string ErrorMessage(const std::string& body) {
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (!ec && v.is_object()) {
    if (const json::object* err = json_fields::ObjectField(v.as_object(), "error")) {
      if (std::string m = json_fields::StringField(*err, "message"); !m.empty()) return m;
    }
  }
  return body.substr(0, 300);
}

Status HttpError(long status, const std::string& body, const std::string& server) {
  std::string m = ErrorMessage(body);
  switch (status) {
    case 400: case 413: case 415: case 422: return Status::InvalidArgument(m);
    case 401: case 403:
      return Status::Unauthenticated("key refused by " + server + ": " + m +
                                     " (set --api-key or SINEW_API_KEY)");
    case 404:
      return Status::NotFound(m + " (check the id with `sinew sessions list`)");
    case 409: return Status::AlreadyExists(m);
    case 429: case 502: case 503: case 504:
      return Status::Unavailable("server busy or unavailable (" + std::to_string(status) +
                                 "): " + m + "; try again shortly");
    default:
      return Status::Internal("server answered " + std::to_string(status) + ": " + m);
  }
}

// HttpError's hint for a 404 names sessions; a file call's names the sandbox and the path.
Status SandboxFileError(const Status& s) {
  if (s.code() != StatusCode::kNotFound) return s;
  const std::string& m = s.message();
  return Status::NotFound(m.substr(0, m.find(" (check the id with")) +
                          " (check the sandbox id with `sinew sandbox ls`, and the path)");
}

}  // namespace

Result<SessionView> ParseSession(const json::value& v) {
  if (!v.is_object()) return Status::Internal("server sent a session that is not an object");
  const json::object& o = v.as_object();
  SessionView s;
  s.id = StringField(o, "id");
  s.tenant = StringField(o, "tenant");
  s.title = StringField(o, "title");
  s.status = StringField(o, "status");
  s.forked_from_session = StringField(o, "forked_from_session");
  s.created_unix_ms = static_cast<int64_t>(UintField(o, "created_unix_ms"));
  s.updated_unix_ms = static_cast<int64_t>(UintField(o, "updated_unix_ms"));
  s.next_seq = UintField(o, "next_seq");
  s.forked_at_seq = UintField(o, "forked_at_seq");
  s.raw = o;
  if (s.id.empty()) return Status::Internal("server sent a session without an id");
  return s;
}

Result<v1::Event> ParseEvent(std::string_view text) {
  v1::Event ev;
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = true;
  auto st = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(text.data(), text.size()), &ev, opts);
  if (!st.ok()) {
    return Status::InvalidArgument("not an event: " + std::string(st.message()) + " in " +
                                   std::string(text.substr(0, 120)));
  }
  return ev;
}

ApiClient::ApiClient(std::string base_url, std::string api_key, std::string ca_file)
    : http_(std::move(base_url), std::move(api_key), std::move(ca_file)) {}

Result<json::value> ApiClient::Call(const std::string& method, const std::string& path,
                                    const std::string& body, const std::string& content_type) {
  SINEW_ASSIGN_OR_RETURN(HttpResponse resp, http_.Send(method, path, body, content_type));
  if (resp.status < 200 || resp.status >= 300) {
    return HttpError(resp.status, resp.body, http_.base_url());
  }
  boost::system::error_code ec;
  json::value v = json::parse(resp.body, ec);
  if (ec) return Status::Internal("server sent invalid JSON for " + path + ": " + ec.message());
  return v;
}

Result<json::value> ApiClient::JsonCall(const std::string& method, const std::string& path, const std::string& body) {
  auto v = Call(method, path, body);
  if (v.ok() || v.status().code() != StatusCode::kNotFound || path.rfind("/v1/sandboxes", 0) != 0) return v;
  // HttpError's hint names sessions.
  std::string m = v.status().message();
  m = m.substr(0, m.find(" (check the id with")) + " (check the id with `sinew sandbox ls`)";
  return Status::NotFound(m);
}

Result<json::value> ApiClient::ExecuteStreamed(
    const std::string& id, const std::string& body,
    const std::function<void(const std::string& stream, const std::string& text)>& on_output) {
  std::string prefix;  // the first bytes, to explain an answer that is not a stream
  std::optional<json::value> result;
  Status failed;
  SseParser parser([&](const SseEvent& e) {
    boost::system::error_code ec;
    json::value v = json::parse(e.data, ec);
    if (ec || !v.is_object()) {
      failed = Status::Internal("the server sent an event that is not a JSON object: " + e.data.substr(0, 200));
      return false;
    }
    const json::object& o = v.as_object();
    if (e.event == "output") {
      on_output(StringField(o, "stream"), StringField(o, "text"));
    } else if (e.event == "result" && o.contains("result")) {
      result = o.at("result");
    } else if (e.event == "error") {
      const json::object* err = json_fields::ObjectField(o, "error");
      const std::string code = err != nullptr ? StringField(*err, "code") : "";
      failed = HttpError(code == "conflict" ? 409 : 503, e.data, http_.base_url());
    }
    return true;
  });
  auto status = http_.PostStream("/v1/sandboxes/" + http::PercentEncode(id) + "/execute", body,
                                 [&](std::string_view bytes) {
                                   if (prefix.size() < 4096) prefix.append(bytes.substr(0, 4096));
                                   return parser.Feed(bytes);
                                 });
  if (!status.ok()) return status.status();
  if (*status != 200) {
    Status s = HttpError(*status, prefix, http_.base_url());
    if (s.code() != StatusCode::kNotFound) return s;
    std::string m = s.message();
    return Status::NotFound(m.substr(0, m.find(" (check the id with")) + " (check the id with `sinew sandbox ls`)");
  }
  if (!failed.ok()) return failed;
  if (!result) return Status::Unavailable("the server's answer ended before the call's result; the call may still run");
  return *std::move(result);
}

Result<json::value> ApiClient::UploadFile(const std::string& id, const std::string& path,
                                          const std::string& data) {
  auto answer = Call("PUT", "/v1/sandboxes/" + http::PercentEncode(id) + "/files?path=" + http::PercentEncode(path),
                     data, "application/octet-stream");
  if (!answer.ok()) return SandboxFileError(answer.status());
  json::value v = std::move(answer).value();
  const json::value* file = v.is_object() ? v.as_object().if_contains("file") : nullptr;
  if (file == nullptr) return Status::Internal("the server's answer to an upload has no file");
  return *file;
}

Result<std::string> ApiClient::DownloadFile(const std::string& id, const std::string& path) {
  SINEW_ASSIGN_OR_RETURN(HttpResponse resp,
                         http_.Send("GET", "/v1/sandboxes/" + http::PercentEncode(id) +
                                               "/files?path=" + http::PercentEncode(path),
                                    "", ""));
  if (resp.status < 200 || resp.status >= 300) {
    return SandboxFileError(HttpError(resp.status, resp.body, http_.base_url()));
  }
  return std::move(resp.body);
}

Result<SessionView> ApiClient::SessionCall(const std::string& method, const std::string& path,
                                           const std::string& body,
                                           const std::string& content_type) {
  SINEW_ASSIGN_OR_RETURN(json::value v, Call(method, path, body, content_type));
  const json::value* s = v.is_object() ? v.as_object().if_contains("session") : nullptr;
  if (s == nullptr) return Status::Internal("server response for " + path + " has no session");
  return ParseSession(*s);
}

Result<SessionView> ApiClient::Submit(const json::object& body) {
  return SessionCall("POST", "/v1/sessions", json::serialize(body));
}

Result<SessionView> ApiClient::GetSession(const std::string& id) {
  return SessionCall("GET", "/v1/sessions/" + id, "");
}

Result<std::vector<SessionView>> ApiClient::ListSessions(const std::string& status, uint32_t limit,
                                                         const std::string& page_token,
                                                         std::string* next_token) {
  std::string path = "/v1/sessions?limit=" + std::to_string(limit);
  if (!status.empty()) path += "&status=" + status;
  if (!page_token.empty()) path += "&page_token=" + page_token;
  SINEW_ASSIGN_OR_RETURN(json::value v, Call("GET", path));
  std::vector<SessionView> out;
  const json::object& o = v.as_object();
  if (const json::array* list = json_fields::ArrayField(o, "sessions")) {
    for (const auto& s : *list) {
      SINEW_ASSIGN_OR_RETURN(SessionView view, ParseSession(s));
      out.push_back(std::move(view));
    }
  }
  *next_token = StringField(o, "next_page_token");
  return out;
}

Result<std::vector<std::pair<v1::Event, std::string>>> ApiClient::Events(const std::string& id,
                                                                         uint64_t after,
                                                                         uint32_t limit) {
  SINEW_ASSIGN_OR_RETURN(json::value v, Call("GET", "/v1/sessions/" + id + "/events?after=" +
                                                        std::to_string(after) +
                                                        "&limit=" + std::to_string(limit)));
  std::vector<std::pair<v1::Event, std::string>> out;
  const json::array* list =
      v.is_object() ? json_fields::ArrayField(v.as_object(), "events") : nullptr;
  if (list == nullptr) return Status::Internal("events response has no list");
  for (const auto& e : *list) {
    std::string text = json::serialize(e);
    SINEW_ASSIGN_OR_RETURN(v1::Event ev, ParseEvent(text));
    out.emplace_back(std::move(ev), std::move(text));
  }
  return out;
}

Result<std::vector<std::pair<v1::Event, std::string>>> ApiClient::AllEvents(const std::string& id,
                                                                            uint64_t from,
                                                                            uint64_t to) {
  std::vector<std::pair<v1::Event, std::string>> all;
  uint64_t after = from > 0 ? from - 1 : 0;
  while (true) {
    SINEW_ASSIGN_OR_RETURN(auto page, Events(id, after, 1000));
    if (page.empty()) break;
    for (auto& e : page) {
      if (to != 0 && e.first.seq() > to) return all;
      after = e.first.seq();
      all.push_back(std::move(e));
    }
  }
  return all;
}

Result<std::vector<std::pair<v1::Event, std::string>>> ApiClient::Export(const std::string& id) {
  SINEW_ASSIGN_OR_RETURN(HttpResponse resp, http_.Send("GET", "/v1/sessions/" + id + "/export", "", ""));
  if (resp.status < 200 || resp.status >= 300) return HttpError(resp.status, resp.body, http_.base_url());
  std::vector<std::pair<v1::Event, std::string>> out;
  size_t pos = 0;
  while (pos < resp.body.size()) {
    size_t nl = resp.body.find('\n', pos);
    if (nl == std::string::npos) nl = resp.body.size();
    std::string line = resp.body.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) continue;
    // The same text as the events endpoint gives (json::serialize of the value).
    boost::system::error_code ec;
    json::value v = json::parse(line, ec);
    if (ec) return Status::Internal("server sent an export line that is not JSON: " + ec.message());
    line = json::serialize(v);
    SINEW_ASSIGN_OR_RETURN(v1::Event ev, ParseEvent(line));
    out.emplace_back(std::move(ev), std::move(line));
  }
  return out;
}

Result<SessionView> ApiClient::Message(const std::string& id, const std::string& text) {
  json::object body{{"text", text}};
  return SessionCall("POST", "/v1/sessions/" + id + "/messages", json::serialize(body));
}

Result<SessionView> ApiClient::Cancel(const std::string& id) {
  return SessionCall("POST", "/v1/sessions/" + id + "/cancel", "{}");
}

Result<SessionView> ApiClient::Close(const std::string& id) {
  return SessionCall("POST", "/v1/sessions/" + id + "/close", "{}");
}

Result<SessionView> ApiClient::Decide(const std::string& id, const std::string& call_id, bool approve,
                                      const std::string& message) {
  json::object decision{{"call_id", call_id}, {"decision", approve ? "approve" : "deny"}};
  if (!message.empty()) decision["message"] = message;
  json::object body{{"decisions", json::array{std::move(decision)}}};
  return SessionCall("POST", "/v1/sessions/" + id + "/decisions", json::serialize(body));
}

Result<SessionView> ApiClient::Interrupt(const std::string& id, const std::string& message) {
  json::object body{{"message", message}};
  return SessionCall("POST", "/v1/sessions/" + id + "/interrupt", json::serialize(body));
}

Result<ForkView> ApiClient::Fork(const std::string& id, const json::object& body) {
  const std::string path = "/v1/sessions/" + id + "/fork";
  SINEW_ASSIGN_OR_RETURN(json::value v, Call("POST", path, json::serialize(body), "application/json"));
  const json::array* sessions = nullptr;
  if (v.is_object()) {
    if (const json::value* a = v.as_object().if_contains("sessions"); a != nullptr && a->is_array()) sessions = &a->as_array();
  }
  if (sessions == nullptr || sessions->empty()) return Status::Internal("server response for " + path + " has no sessions");
  ForkView out;
  for (const auto& s : *sessions) {
    SINEW_ASSIGN_OR_RETURN(SessionView view, ParseSession(s));
    out.sessions.push_back(std::move(view));
  }
  if (const json::value* sb = v.as_object().if_contains("sandbox")) out.sandbox = *sb;
  out.raw = v.as_object();
  return out;
}

Result<SessionView> ApiClient::Import(const std::string& ndjson) {
  return SessionCall("POST", "/v1/sessions/import", ndjson, "application/x-ndjson");
}

Status ApiClient::Stream(const std::string& id, uint64_t after,
                         const std::function<void(const v1::Event&)>& on_event,
                         const std::function<void()>& on_tick,
                         const std::atomic<bool>* stop) {
  std::string prefix;  // the first bytes, to explain an error answer
  Status parse_error;
  SseParser parser([&](const SseEvent& e) {
    auto ev = ParseEvent(e.data);
    if (!ev.ok()) {
      parse_error = ev.status();
      return false;
    }
    on_event(*ev);
    return true;
  });
  std::vector<std::string> headers;
  if (after > 0) headers.push_back("Last-Event-ID: " + std::to_string(after));
  auto status = http_.Stream("/v1/sessions/" + id + "/events/stream", headers,
                             [&](std::string_view bytes) {
                               if (prefix.size() < 4096) prefix.append(bytes.substr(0, 4096));
                               parser.Feed(bytes);
                               return parse_error.ok();
                             },
                             on_tick, stop);
  if (!status.ok()) return status.status();
  if (*status != 200) return HttpError(*status, prefix, http_.base_url());
  return parse_error;
}

}  // namespace sinew::client
