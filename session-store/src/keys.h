// Key layout of the RocksDB store (internal to session-store and its benchmark).
//
// Column families:
//   events       id(16 bytes) + seq(8 bytes, big-endian)  -> serialized v1.Event
//   sessions     id(16 bytes)                              -> serialized v1.Session
//   leases       id(16 bytes)                              -> serialized v1.Lease
//   index        'A' + ~created_ms(8 BE) + id              -> ""   (all tenants, newest first)
//                'T' + tenant + '\0' + ~created_ms + id    -> ""   (one tenant, newest first)
//   idempotency  id(16 bytes) + key                        -> serialized v1.AppendResponse
//   default      'U' + tenant + '\0' + record(16 bytes)      -> serialized v1.AuditRecord
//                (the tenant audit log; record = written_ms(8 BE) + counter(8 BE), oldest first)
// A session's events are contiguous and in order; big-endian keeps numeric order bytewise.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sinew/status.h"

namespace sinew::store::keys {

// The column families, in the order RocksStore opens them (handles index this list).
inline constexpr const char* kColumnFamilies[] = {"default", "events",      "sessions",
                                                  "leases",  "index",       "idempotency"};

inline constexpr size_t kIdBytes = 16;
inline constexpr size_t kIdHexChars = 32;

// A new session id: 48-bit millisecond time + 80 random bits, as 32 lowercase hex chars.
std::string NewSessionId();
// Validates a textual id and returns its 16 raw bytes.
Result<std::string> ParseSessionId(std::string_view id);
std::string FormatSessionId(std::string_view raw);

std::string EventKey(std::string_view raw_id, uint64_t seq);
uint64_t SeqFromEventKey(std::string_view key);
void AppendBigEndian64(std::string* out, uint64_t v);
uint64_t ReadBigEndian64(std::string_view bytes);

std::string AllIndexKey(int64_t created_ms, std::string_view raw_id);
std::string TenantIndexPrefix(std::string_view tenant);
std::string TenantIndexKey(std::string_view tenant, int64_t created_ms, std::string_view raw_id);

std::string AuditPrefix(std::string_view tenant);
std::string AuditKey(std::string_view tenant, std::string_view raw_record);

std::string IdempotencyKey(std::string_view raw_id, std::string_view key);

std::string ToHex(std::string_view bytes);
Result<std::string> FromHex(std::string_view hex);

}  // namespace sinew::store::keys
