#include "json_util.h"

#include <google/protobuf/util/json_util.h>

#include <chrono>

namespace sinew::harness {

namespace json = boost::json;

Result<json::object> ParseObject(std::string_view text, const std::string& what) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) return Status::InvalidArgument(what + " is not valid JSON: " + ec.message());
  if (!v.is_object()) return Status::InvalidArgument(what + " must be a JSON object");
  return std::move(v.as_object());
}

Status ReadString(const json::object& obj, const char* key, const std::string& where,
                  std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status::Ok();
  if (!it->value().is_string()) {
    return Status::InvalidArgument(where + "." + key + " must be a string");
  }
  *out = std::string(it->value().as_string());
  return Status::Ok();
}

Status ReadUint(const json::object& obj, const char* key, const std::string& where, uint64_t max,
                uint64_t* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status::Ok();
  const json::value& v = it->value();
  uint64_t value = 0;
  if (v.is_uint64()) {
    value = v.as_uint64();
  } else if (v.is_int64() && v.as_int64() >= 0) {
    value = static_cast<uint64_t>(v.as_int64());
  } else {
    return Status::InvalidArgument(where + "." + key + " must be a non-negative integer");
  }
  if (value > max) {
    return Status::InvalidArgument(where + "." + key + " must be at most " + std::to_string(max));
  }
  *out = value;
  return Status::Ok();
}

Status ReadUint32(const json::object& obj, const char* key, const std::string& where,
                  uint32_t* out) {
  uint64_t v = *out;
  SINEW_RETURN_IF_ERROR(ReadUint(obj, key, where, UINT32_MAX, &v));
  *out = static_cast<uint32_t>(v);
  return Status::Ok();
}

Status ReadBool(const json::object& obj, const char* key, const std::string& where, bool* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status::Ok();
  if (!it->value().is_bool()) return Status::InvalidArgument(where + "." + key + " must be a boolean");
  *out = it->value().as_bool();
  return Status::Ok();
}

Status RejectUnknownKeys(const json::object& obj, std::string_view allowed,
                         const std::string& where) {
  for (const auto& kv : obj) {
    std::string key(kv.key());
    bool found = false;
    size_t pos = 0;
    while (pos <= allowed.size()) {
      size_t comma = allowed.find(',', pos);
      if (comma == std::string_view::npos) comma = allowed.size();
      if (allowed.substr(pos, comma - pos) == key) found = true;
      pos = comma + 1;
    }
    if (!found) {
      return Status::InvalidArgument(where + " has an unknown field '" + key +
                                     "'; allowed: " + std::string(allowed));
    }
  }
  return Status::Ok();
}

v1::SessionStatus StatusFromName(std::string_view name) {
  for (int s = v1::SESSION_STATUS_QUEUED; s <= v1::SESSION_STATUS_CANCELLED; ++s) {
    auto status = static_cast<v1::SessionStatus>(s);
    if (store::SessionStatusName(status) == name) return status;
  }
  return v1::SESSION_STATUS_UNSPECIFIED;
}

bool IsTerminal(v1::SessionStatus status) {
  return status == v1::SESSION_STATUS_COMPLETED || status == v1::SESSION_STATUS_FAILED ||
         status == v1::SESSION_STATUS_CANCELLED;
}

json::object SessionToJson(const v1::Session& s) {
  json::object o;
  o["id"] = s.id();
  o["tenant"] = s.tenant();
  o["title"] = s.title();
  o["status"] = store::SessionStatusName(s.status());
  o["created_unix_ms"] = s.created_unix_ms();
  o["updated_unix_ms"] = s.updated_unix_ms();
  o["next_seq"] = s.next_seq();
  json::object meta;
  for (const auto& [k, v] : s.metadata()) meta[k] = v;
  o["metadata"] = std::move(meta);
  o["forked_from_session"] = s.forked_from_session();
  o["forked_at_seq"] = s.forked_at_seq();
  return o;
}

std::string EventToJson(const v1::Event& event) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  auto status = google::protobuf::util::MessageToJsonString(event, &out, options);
  if (!status.ok()) return "{}";
  return out;
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint64_t UintField(const boost::json::object& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end()) return 0;
  if (it->value().is_uint64()) return it->value().as_uint64();
  if (it->value().is_int64() && it->value().as_int64() > 0) {
    return static_cast<uint64_t>(it->value().as_int64());
  }
  return 0;
}

std::string StringField(const boost::json::object& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || !it->value().is_string()) return "";
  return std::string(it->value().as_string());
}

}  // namespace sinew::harness
