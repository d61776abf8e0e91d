// The seam between the API handler and the HTTP transport: one request in, and a way to
// send either one whole response or a stream of server-sent events back. The transport
// is the process-wide HTTP server of common/ (sinew/http/server.h).
#pragma once

#include "sinew/http/server.h"

namespace sinew::model {

using HttpRequest = sinew::http::Request;
using ResponseStream = sinew::http::ResponseStream;

}  // namespace sinew::model
