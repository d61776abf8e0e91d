// The Session JSON of the REST contract (field reads: sinew/json_fields.h; an Event is
// sinew::ProtoJsonLine of it, sinew/proto_json.h).
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "sinew/proto/events.pb.h"
#include "sinew/proto/session_store.pb.h"
#include "sinew/session_store/session_store.h"

namespace sinew::harness {

// The contract's Session JSON.
boost::json::object SessionToJson(const v1::Session& session);

// "queued" -> QUEUED; UNSPECIFIED for an unknown name.
v1::SessionStatus StatusFromName(std::string_view name);
bool IsTerminal(v1::SessionStatus status);

int64_t NowUnixMs();

}  // namespace sinew::harness
