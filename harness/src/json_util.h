// Small Boost.JSON helpers: typed field reads with errors that name the field, and the
// Session/Event JSON of the REST contract.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <string>

#include "sinew/proto/events.pb.h"
#include "sinew/proto/session_store.pb.h"
#include "sinew/session_store/session_store.h"
#include "sinew/status.h"

namespace sinew::harness {

// Parses `text` as a JSON object; kInvalidArgument names `what` on failure.
[[nodiscard]] Result<boost::json::object> ParseObject(std::string_view text,
                                                      const std::string& what);

// Each reads obj[key] when present (leaving *out unchanged when absent) and fails with
// kInvalidArgument "<where>.<key> must be ..." when it has the wrong type or range.
[[nodiscard]] Status ReadString(const boost::json::object& obj, const char* key,
                                const std::string& where, std::string* out);
[[nodiscard]] Status ReadUint(const boost::json::object& obj, const char* key,
                              const std::string& where, uint64_t max, uint64_t* out);
[[nodiscard]] Status ReadUint32(const boost::json::object& obj, const char* key,
                                const std::string& where, uint32_t* out);
[[nodiscard]] Status ReadBool(const boost::json::object& obj, const char* key,
                              const std::string& where, bool* out);
// Fails when obj has a key not in `allowed` (a comma-separated list).
[[nodiscard]] Status RejectUnknownKeys(const boost::json::object& obj, std::string_view allowed,
                                       const std::string& where);

// The contract's Session JSON.
boost::json::object SessionToJson(const v1::Session& session);
// The contract's Event JSON (proto3 JSON mapping, original field names), on one line.
std::string EventToJson(const v1::Event& event);

// Lenient field readers for model responses: 0 / "" when the field is absent or has
// another type.
uint64_t UintField(const boost::json::object& o, const char* key);
std::string StringField(const boost::json::object& o, const char* key);

// "queued" -> QUEUED; UNSPECIFIED for an unknown name.
v1::SessionStatus StatusFromName(std::string_view name);
bool IsTerminal(v1::SessionStatus status);

int64_t NowUnixMs();

}  // namespace sinew::harness
