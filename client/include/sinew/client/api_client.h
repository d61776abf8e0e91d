// ApiClient: the harness REST API (docs/harness-openapi.yaml) as typed calls.
// Errors carry the server's own message plus what to do next.
//
// Thread-safety: one ApiClient per thread.
#pragma once

#include <boost/json.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sinew/client/http_client.h"
#include "sinew/proto/events.pb.h"
#include "sinew/status.h"

namespace sinew::client {

struct SessionView {
  std::string id, tenant, title, status, forked_from_session;
  int64_t created_unix_ms = 0, updated_unix_ms = 0;
  uint64_t next_seq = 0, forked_at_seq = 0;
  boost::json::object raw;  // the object as the server sent it (for --json)
};

// POST /v1/sessions/{id}/fork's answer: the new sessions (n of them), and the sandbox they
// start from (null when the source had none at that point).
struct ForkView {
  std::vector<SessionView> sessions;
  boost::json::value sandbox;
  boost::json::object raw;  // the answer as the server sent it (for --json)
};

class ApiClient {
 public:
  ApiClient(std::string base_url, std::string api_key, std::string ca_file = "");

  [[nodiscard]] Result<SessionView> Submit(const boost::json::object& body);
  [[nodiscard]] Result<SessionView> GetSession(const std::string& id);
  // One page of sessions, newest first; *next_token is set to the next page's token.
  [[nodiscard]] Result<std::vector<SessionView>> ListSessions(const std::string& status,
                                                              uint32_t limit,
                                                              const std::string& page_token,
                                                              std::string* next_token);
  // Events with seq > after, at most limit; each paired with its JSON text as sent.
  [[nodiscard]] Result<std::vector<std::pair<v1::Event, std::string>>> Events(
      const std::string& id, uint64_t after, uint32_t limit);
  // Every event from `from` to `to` (0: the end), page by page.
  [[nodiscard]] Result<std::vector<std::pair<v1::Event, std::string>>> AllEvents(
      const std::string& id, uint64_t from = 1, uint64_t to = 0);
  // The whole log through GET /v1/sessions/{id}/export (which leaves an audit event after
  // it), one pair per event line.
  [[nodiscard]] Result<std::vector<std::pair<v1::Event, std::string>>> Export(const std::string& id);
  [[nodiscard]] Result<SessionView> Message(const std::string& id, const std::string& text);
  [[nodiscard]] Result<SessionView> Cancel(const std::string& id);
  // Closes a session created with keep_open (POST .../close): it completes.
  [[nodiscard]] Result<SessionView> Close(const std::string& id);
  // Approves or denies a tool call that waits for a decision (POST .../decisions); the
  // message (may be empty) goes to the model with a denial.
  [[nodiscard]] Result<SessionView> Decide(const std::string& id, const std::string& call_id, bool approve,
                                           const std::string& message);
  // Interrupts a session (POST .../interrupt): what runs is cut, and it goes on with
  // `message`.
  [[nodiscard]] Result<SessionView> Interrupt(const std::string& id, const std::string& message);
  [[nodiscard]] Result<ForkView> Fork(const std::string& id, const boost::json::object& body);
  [[nodiscard]] Result<SessionView> Import(const std::string& ndjson);

  // Follows the SSE stream after `after`, calling on_event for each event, until the
  // server ends it. Returns how it ended: OK (ended by the server), kUnavailable (link
  // broke: reconnect with the last seen seq), or an API error.
  // `*stop` (may be null) ends it early, as HttpClient::Stream says.
  [[nodiscard]] Status Stream(const std::string& id, uint64_t after,
                              const std::function<void(const v1::Event&)>& on_event,
                              const std::function<void()>& on_tick = {},
                              const std::atomic<bool>* stop = nullptr);

  // The sandbox API (/v1/sandboxes; docs/sandbox-api.md), untyped: `method` on `path`
  // with a JSON `body`, and the JSON of a 2xx answer (an error with the server's message
  // otherwise).
  [[nodiscard]] Result<boost::json::value> JsonCall(const std::string& method, const std::string& path,
                                                    const std::string& body = "");

  // A tool call in sandbox `id` with its output as it comes (POST .../execute answered as
  // events; `body` as JsonCall's): `on_output(stream, text)` for each piece ("stdout" or
  // "stderr"), then the call's result object. An API error for a refusal before the call
  // started, or for the stream's `error` event.
  [[nodiscard]] Result<boost::json::value> ExecuteStreamed(
      const std::string& id, const std::string& body,
      const std::function<void(const std::string& stream, const std::string& text)>& on_output);

  // A file into sandbox `id` (PUT /v1/sandboxes/{id}/files?path=...): the answer's
  // "file" object (path, size, sha256).
  [[nodiscard]] Result<boost::json::value> UploadFile(const std::string& id, const std::string& path,
                                                      const std::string& data);
  // A file's bytes out of sandbox `id` (GET /v1/sandboxes/{id}/files?path=...).
  [[nodiscard]] Result<std::string> DownloadFile(const std::string& id, const std::string& path);

  const std::string& base_url() const { return http_.base_url(); }

 private:
  Result<boost::json::value> Call(const std::string& method, const std::string& path,
                                  const std::string& body = "",
                                  const std::string& content_type = "application/json");
  Result<SessionView> SessionCall(const std::string& method, const std::string& path,
                                  const std::string& body,
                                  const std::string& content_type = "application/json");

  HttpClient http_;
};

// Parses the JSON object of a session as the API sends it.
Result<SessionView> ParseSession(const boost::json::value& v);
// Parses one event in the proto3 JSON mapping.
Result<v1::Event> ParseEvent(std::string_view json);

}  // namespace sinew::client
