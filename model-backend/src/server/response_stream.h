// The seam between the API handler and the HTTP transport: one request in, and a way
// to send either one whole response or a stream of server-sent events back.
#pragma once

#include <string>

namespace sinew::model {

struct HttpRequest {
  std::string method;        // "GET", "POST", ...
  std::string target;        // path and query, e.g. "/v1/completions"
  std::string content_type;  // the Content-Type header, "" if absent
  std::string body;
};

// Implemented by the HTTP session. Thread-safety: every method may be called from any
// thread (the session serialises its writes), but one request's calls must be made in
// order: Send once, or StartEvents, SendEvent..., EndEvents.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  // One complete response.
  virtual void Send(int status, std::string content_type, std::string body) = 0;
  // Starts a `text/event-stream` response (chunked). False if the client has gone.
  virtual bool StartEvents() = 0;
  // Sends `data` (already formatted, e.g. "data: {...}\n\n"). False if the client has gone.
  virtual bool SendEvent(std::string data) = 0;
  // Ends the event stream.
  virtual void EndEvents() = 0;
  // False once the client has hung up (then nothing sent reaches it).
  virtual bool ClientConnected() const = 0;
};

}  // namespace sinew::model
