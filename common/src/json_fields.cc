#include "sinew/json_fields.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace sinew::json_fields {
namespace json = boost::json;
namespace {

// obj[key] when it is given (present and not null), else nullptr.
const json::value* Given(const json::object& obj, std::string_view key) {
  const json::value* value = obj.if_contains(key);
  return value == nullptr || value->is_null() ? nullptr : value;
}

Status Invalid(std::string_view where, std::string_view key, std::string_view what) {
  return Status::InvalidArgument(FieldPath(where, key) + " " + std::string(what));
}

// 2^63 as a double: the first whole number past int64.
constexpr double kTwoTo63 = 9223372036854775808.0;

}  // namespace

std::string FieldPath(std::string_view where, std::string_view key) {
  if (where.empty()) return std::string(key);
  std::string path(where);
  path += '.';
  path += key;
  return path;
}

std::string IndexPath(std::string_view where, size_t index) {
  return std::string(where) + "[" + std::to_string(index) + "]";
}

std::string FormatNumber(double number) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", number);
  return buf;
}

Result<json::object> ParseObject(std::string_view text, std::string_view what) {
  boost::system::error_code ec;
  json::value value = json::parse(text, ec);
  if (ec) return Status::InvalidArgument(std::string(what) + " is not valid JSON: " + ec.message());
  if (!value.is_object())
    return Status::InvalidArgument(std::string(what) + " must be a JSON object");
  return std::move(value.as_object());
}

bool Has(const json::object& obj, std::string_view key) { return Given(obj, key) != nullptr; }

Status Require(const json::object& obj, std::string_view key, std::string_view where) {
  if (Has(obj, key)) return Status::Ok();
  return Invalid(where, key, "is required");
}

Status RejectUnknownKeys(const json::object& obj, std::string_view allowed,
                         std::string_view where) {
  for (const auto& kv : obj) {
    const std::string_view key = kv.key();
    bool found = false;
    size_t pos = 0;
    while (!found && pos <= allowed.size()) {
      size_t comma = allowed.find(',', pos);
      if (comma == std::string_view::npos) comma = allowed.size();
      found = allowed.substr(pos, comma - pos) == key;
      pos = comma + 1;
    }
    if (!found) {
      std::string message =
          where.empty() ? "unknown field '" : std::string(where) + " has an unknown field '";
      return Status::InvalidArgument(message + std::string(key) +
                                     "'; allowed: " + std::string(allowed));
    }
  }
  return Status::Ok();
}

Status ReadString(const json::object& obj, std::string_view key, std::string_view where,
                  std::string* out) {
  const json::value* value = Given(obj, key);
  if (value == nullptr) return Status::Ok();
  if (!value->is_string()) return Invalid(where, key, "must be a string");
  *out = std::string(value->as_string());
  return Status::Ok();
}

Status ReadBool(const json::object& obj, std::string_view key, std::string_view where, bool* out) {
  const json::value* value = Given(obj, key);
  if (value == nullptr) return Status::Ok();
  if (!value->is_bool()) return Invalid(where, key, "must be a boolean");
  *out = value->as_bool();
  return Status::Ok();
}

Status ReadUint(const json::object& obj, std::string_view key, std::string_view where, uint64_t max,
                uint64_t* out) {
  const json::value* value = Given(obj, key);
  if (value == nullptr) return Status::Ok();
  uint64_t number = 0;
  if (value->is_uint64()) {
    number = value->as_uint64();
  } else if (value->is_int64() && value->as_int64() >= 0) {
    number = static_cast<uint64_t>(value->as_int64());
  } else {
    return Invalid(where, key, "must be a non-negative integer");
  }
  if (number > max) return Invalid(where, key, "must be at most " + std::to_string(max));
  *out = number;
  return Status::Ok();
}

Status ReadUint32(const json::object& obj, std::string_view key, std::string_view where,
                  uint32_t* out) {
  uint64_t number = *out;
  SINEW_RETURN_IF_ERROR(ReadUint(obj, key, where, UINT32_MAX, &number));
  *out = static_cast<uint32_t>(number);
  return Status::Ok();
}

Status ReadInt(const json::object& obj, std::string_view key, std::string_view where, int64_t min,
               int64_t max, int64_t* out) {
  const json::value* value = Given(obj, key);
  if (value == nullptr) return Status::Ok();
  auto out_of_range = [&] {
    return Invalid(where, key,
                   "must be between " + std::to_string(min) + " and " + std::to_string(max));
  };
  int64_t number = 0;
  if (value->is_int64()) {
    number = value->as_int64();
  } else if (value->is_uint64()) {
    if (value->as_uint64() > static_cast<uint64_t>(INT64_MAX)) return out_of_range();
    number = static_cast<int64_t>(value->as_uint64());
  } else if (value->is_double() && std::trunc(value->as_double()) == value->as_double()) {
    // Converting a double past the int64 range is undefined (sandbox_tools_fuzz found 2.2e20).
    const double whole = value->as_double();
    if (!(whole >= -kTwoTo63 && whole < kTwoTo63)) return out_of_range();
    number = static_cast<int64_t>(whole);
  } else {
    return Invalid(where, key, "must be an integer");
  }
  if (number < min || number > max) return out_of_range();
  *out = number;
  return Status::Ok();
}

Status ReadNumber(const json::object& obj, std::string_view key, std::string_view where, double min,
                  double max, double* out) {
  const json::value* value = Given(obj, key);
  if (value == nullptr) return Status::Ok();
  if (!value->is_number()) return Invalid(where, key, "must be a number");
  const double number = value->to_number<double>();
  if (!std::isfinite(number) || number < min || number > max) {
    return Invalid(where, key,
                   "must be between " + FormatNumber(min) + " and " + FormatNumber(max));
  }
  *out = number;
  return Status::Ok();
}

Status ReadObject(const json::object& obj, std::string_view key, std::string_view where,
                  const json::object** out) {
  const json::value* value = Given(obj, key);
  if (value != nullptr && !value->is_object()) return Invalid(where, key, "must be an object");
  *out = value == nullptr ? nullptr : &value->as_object();
  return Status::Ok();
}

Status ReadArray(const json::object& obj, std::string_view key, std::string_view where,
                 const json::array** out) {
  const json::value* value = Given(obj, key);
  if (value != nullptr && !value->is_array()) return Invalid(where, key, "must be an array");
  *out = value == nullptr ? nullptr : &value->as_array();
  return Status::Ok();
}

std::string StringField(const json::object& obj, std::string_view key) {
  const json::value* value = obj.if_contains(key);
  return value != nullptr && value->is_string() ? std::string(value->as_string()) : std::string();
}

uint64_t UintField(const json::object& obj, std::string_view key) {
  const json::value* value = obj.if_contains(key);
  if (value == nullptr) return 0;
  if (value->is_uint64()) return value->as_uint64();
  if (value->is_int64())
    return value->as_int64() > 0 ? static_cast<uint64_t>(value->as_int64()) : 0;
  if (value->is_string()) {
    const std::string_view text = value->as_string();
    uint64_t number = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
    return ec == std::errc() && end == text.data() + text.size() ? number : 0;
  }
  return 0;
}

int64_t IntField(const json::object& obj, std::string_view key) {
  const json::value* value = obj.if_contains(key);
  if (value == nullptr) return 0;
  if (value->is_int64()) return value->as_int64();
  if (value->is_uint64()) {
    return value->as_uint64() > static_cast<uint64_t>(INT64_MAX)
               ? 0
               : static_cast<int64_t>(value->as_uint64());
  }
  if (value->is_double()) {
    const double number = value->as_double();
    return number >= -kTwoTo63 && number < kTwoTo63 ? static_cast<int64_t>(number) : 0;
  }
  return 0;
}

double NumberField(const json::object& obj, std::string_view key) {
  const json::value* value = obj.if_contains(key);
  return value != nullptr && value->is_number() ? value->to_number<double>() : 0.0;
}

bool BoolField(const json::object& obj, std::string_view key) {
  const json::value* value = obj.if_contains(key);
  return value != nullptr && value->is_bool() && value->as_bool();
}

const json::object* ObjectField(const json::object& obj, std::string_view key) {
  const json::value* value = obj.if_contains(key);
  return value != nullptr ? value->if_object() : nullptr;
}

const json::array* ArrayField(const json::object& obj, std::string_view key) {
  const json::value* value = obj.if_contains(key);
  return value != nullptr ? value->if_array() : nullptr;
}

}  // namespace sinew::json_fields
