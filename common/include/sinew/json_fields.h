// The one way Sinew code reads fields of a JSON object (Boost.JSON): requests, configs,
// tool inputs, and the replies of model servers.
//
// Strict readers (for input Sinew validates) fail with kInvalidArgument and a message
// that names the field's full path: "<path> must be a string", "<path> is required",
// "<path> must be between 1 and 64", "<where> has an unknown field 'x'; allowed: a,b".
// A path is built by the caller: `where` is the path of the object read ("config.models.m",
// "tools[2].function", or "" for the top level), the reader appends ".key".
// A field that is absent or JSON null is "not given": the reader returns Ok and leaves
// *out unchanged, so the caller sets defaults first. On error *out is unchanged too.
//
// Lenient readers (for replies of other servers, and Sinew's own files) never fail: a
// field that is absent or has another type reads as 0 / "" / nullptr.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "sinew/status.h"

namespace sinew::json_fields {

// "where.key", or "key" when `where` is empty.
std::string FieldPath(std::string_view where, std::string_view key);
// "where[index]".
std::string IndexPath(std::string_view where, size_t index);
// A number as people write it: 2, 0.5, -2, 1e+20 (not Boost.JSON's 2E0); 15 digits.
std::string FormatNumber(double number);

// Parses `text` as a JSON object: "<what> is not valid JSON: ..." or
// "<what> must be a JSON object" otherwise.
[[nodiscard]] Result<boost::json::object> ParseObject(std::string_view text, std::string_view what);

// True when obj[key] is present and not null.
bool Has(const boost::json::object& obj, std::string_view key);
// "<path> is required" unless Has(obj, key).
[[nodiscard]] Status Require(const boost::json::object& obj, std::string_view key,
                             std::string_view where);
// Fails when obj has a key not in `allowed` (a comma-separated list, no spaces):
// "<where> has an unknown field 'x'; allowed: a,b", or "unknown field 'x'; ..." when
// `where` is empty.
[[nodiscard]] Status RejectUnknownKeys(const boost::json::object& obj, std::string_view allowed,
                                       std::string_view where);

[[nodiscard]] Status ReadString(const boost::json::object& obj, std::string_view key,
                                std::string_view where, std::string* out);
[[nodiscard]] Status ReadBool(const boost::json::object& obj, std::string_view key,
                              std::string_view where, bool* out);
// An integer in [0, max]; refuses fractions, exponents and negatives ("must be a
// non-negative integer") and larger values ("must be at most <max>").
[[nodiscard]] Status ReadUint(const boost::json::object& obj, std::string_view key,
                              std::string_view where, uint64_t max, uint64_t* out);
[[nodiscard]] Status ReadUint32(const boost::json::object& obj, std::string_view key,
                                std::string_view where, uint32_t* out);
// An integer in [min, max]. A whole number written as 2.0 or 1e3 counts (clients and
// models write them); a fraction is "must be an integer", anything past the range,
// 1e20 and 2^63 included, is "must be between <min> and <max>".
[[nodiscard]] Status ReadInt(const boost::json::object& obj, std::string_view key,
                             std::string_view where, int64_t min, int64_t max, int64_t* out);
// A finite number in [min, max] ("must be between <min> and <max>", FormatNumber'd).
[[nodiscard]] Status ReadNumber(const boost::json::object& obj, std::string_view key,
                                std::string_view where, double min, double max, double* out);
// *out points at obj[key] (inside obj), or is nullptr when it is not given.
[[nodiscard]] Status ReadObject(const boost::json::object& obj, std::string_view key,
                                std::string_view where, const boost::json::object** out);
[[nodiscard]] Status ReadArray(const boost::json::object& obj, std::string_view key,
                               std::string_view where, const boost::json::array** out);

// Lenient readers. UintField also reads a decimal string ("12"), as the proto3 JSON
// mapping writes 64-bit integers; a negative number reads as 0. IntField truncates a
// finite number within the int64 range and reads anything else as 0.
std::string StringField(const boost::json::object& obj, std::string_view key);
uint64_t UintField(const boost::json::object& obj, std::string_view key);
int64_t IntField(const boost::json::object& obj, std::string_view key);
double NumberField(const boost::json::object& obj, std::string_view key);
bool BoolField(const boost::json::object& obj, std::string_view key);
const boost::json::object* ObjectField(const boost::json::object& obj, std::string_view key);
const boost::json::array* ArrayField(const boost::json::object& obj, std::string_view key);

}  // namespace sinew::json_fields
