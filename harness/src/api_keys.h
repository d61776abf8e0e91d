// ApiKeys: the API keys a harness accepts, stored as SHA-256 hashes, and the tenant each
// belongs to (docs/security.md, "API keys").
//
// Keys come from two places: config.api_keys (fixed for the life of the process) and
// config.api_keys_file (re-read whenever its modification time, size or inode changes,
// checked on every request, so keys rotate without a restart). Both map
// "sha256:<64 hex digits>" to a tenant; config.api_keys also still takes a plaintext key
// (hashed at load; the harness logs a warning naming how many).
//
// Match hashes the presented key and compares the hash with every stored hash with
// CRYPTO_memcmp, without stopping at a match: neither the time taken nor a map lookup
// depends on which key (if any) matched.
//
// Thread-safety: Match and Reload may be called from many threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sinew/harness/config.h"
#include "sinew/status.h"

namespace sinew::harness {

inline constexpr std::string_view kKeyHashPrefix = "sha256:";
// Hex digits of the key hash that name a key in audit events and logs.
inline constexpr size_t kKeyIdDigits = 12;

// Lower-case hex SHA-256 of `text`.
std::string Sha256Hex(std::string_view text);
// "sha256:" + Sha256Hex(key): the form config.api_keys and the keys file store.
std::string HashApiKey(std::string_view key);

struct KeyEntry {
  std::array<unsigned char, 32> hash{};
  std::string tenant;
  std::string key_id;  // the first kKeyIdDigits hex digits of the hash
};

// Who made a request: the tenant and the id of the key it presented.
struct Caller {
  std::string tenant;
  std::string key_id;
};

// Parses a key table ({"sha256:<hex>": tenant, ...}). A key without the prefix is a
// plaintext key: hashed when `allow_plaintext` (counted in *plaintext), else refused.
// Errors are kInvalidArgument naming `where` (never the key itself).
[[nodiscard]] Result<std::vector<KeyEntry>> ParseKeyTable(
    const std::map<std::string, std::string>& table, bool allow_plaintext, const std::string& where,
    size_t* plaintext);
// Reads and parses a keys file (a JSON object; hashed keys only).
[[nodiscard]] Result<std::vector<KeyEntry>> LoadKeysFile(const std::string& path);

class ApiKeys {
 public:
  // From config.api_keys and config.api_keys_file (which must exist and parse).
  [[nodiscard]] static Result<std::unique_ptr<ApiKeys>> Create(const HarnessConfig& config);

  // The caller whose key is `presented`, or nullopt. Re-reads the keys file first when it
  // changed; a file that no longer parses keeps the keys read before (logged once).
  std::optional<Caller> Match(std::string_view presented);

  // Re-reads the keys file now (no-op without one). On error the old keys stay.
  [[nodiscard]] Status Reload();

 private:
  struct Stamp {
    int64_t mtime_ns = -1;
    int64_t size = -1;
    uint64_t inode = 0;
    bool operator==(const Stamp&) const = default;
  };
  static Stamp StampOf(const std::string& path);
  void ReloadIfChanged();

  std::vector<KeyEntry> fixed_;
  std::string file_;
  std::mutex mutex_;
  std::vector<KeyEntry> from_file_;  // guarded by mutex_
  Stamp stamp_;                      // guarded by mutex_: the file as last read (or tried)
};

}  // namespace sinew::harness
