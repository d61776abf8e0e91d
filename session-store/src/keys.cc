#include "keys.h"

#include <chrono>
#include <random>

namespace sinew::store::keys {
namespace {

constexpr char kHex[] = "0123456789abcdef";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string ToHex(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 0xf]);
  }
  return out;
}

Result<std::string> FromHex(std::string_view hex) {
  if (hex.size() % 2 != 0) return Status::InvalidArgument("odd number of hex digits");
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = HexValue(hex[i]);
    int lo = HexValue(hex[i + 1]);
    if (hi < 0 || lo < 0) return Status::InvalidArgument("not lowercase hex");
    out.push_back(static_cast<char>((hi << 4) | lo));
  }
  return out;
}

std::string NewSessionId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  auto ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count());
  std::string raw(kIdBytes, '\0');
  for (int i = 0; i < 6; ++i) raw[static_cast<size_t>(i)] = static_cast<char>(ms >> (8 * (5 - i)));
  uint64_t r1 = rng();
  uint64_t r2 = rng();
  for (size_t i = 6; i < 14; ++i) raw[i] = static_cast<char>(r1 >> (8 * (i - 6)));
  raw[14] = static_cast<char>(r2);
  raw[15] = static_cast<char>(r2 >> 8);
  return ToHex(raw);
}

Result<std::string> ParseSessionId(std::string_view id) {
  if (id.empty()) return Status::InvalidArgument("session id is empty");
  if (id.size() != kIdHexChars) {
    return Status::InvalidArgument("malformed session id '" + std::string(id.substr(0, 64)) +
                                   "': expected 32 lowercase hex characters");
  }
  auto raw = FromHex(id);
  if (!raw.ok()) {
    return Status::InvalidArgument("malformed session id '" + std::string(id) +
                                   "': expected 32 lowercase hex characters");
  }
  return raw;
}

std::string FormatSessionId(std::string_view raw) { return ToHex(raw); }

void AppendBigEndian64(std::string* out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

uint64_t ReadBigEndian64(std::string_view bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8 && i < bytes.size(); ++i) {
    v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  }
  return v;
}

std::string EventKey(std::string_view raw_id, uint64_t seq) {
  std::string k(raw_id);
  AppendBigEndian64(&k, seq);
  return k;
}

uint64_t SeqFromEventKey(std::string_view key) {
  return key.size() < kIdBytes + 8 ? 0 : ReadBigEndian64(key.substr(kIdBytes));
}

std::string AllIndexKey(int64_t created_ms, std::string_view raw_id) {
  std::string k = "A";
  AppendBigEndian64(&k, ~static_cast<uint64_t>(created_ms));
  k.append(raw_id);
  return k;
}

std::string TenantIndexPrefix(std::string_view tenant) {
  std::string k = "T";
  k.append(tenant);
  k.push_back('\0');
  return k;
}

std::string TenantIndexKey(std::string_view tenant, int64_t created_ms, std::string_view raw_id) {
  std::string k = TenantIndexPrefix(tenant);
  AppendBigEndian64(&k, ~static_cast<uint64_t>(created_ms));
  k.append(raw_id);
  return k;
}

std::string AuditPrefix(std::string_view tenant) {
  std::string k = "U";
  k.append(tenant);
  k.push_back('\0');
  return k;
}

std::string AuditKey(std::string_view tenant, std::string_view raw_record) {
  std::string k = AuditPrefix(tenant);
  k.append(raw_record);
  return k;
}

std::string IdempotencyKey(std::string_view raw_id, std::string_view key) {
  std::string k(raw_id);
  k.append(key);
  return k;
}

}  // namespace sinew::store::keys
