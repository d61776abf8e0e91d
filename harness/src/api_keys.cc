// ApiKeys: hashed API keys, compared in constant time, re-read from the keys file on change.
#include "api_keys.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "sinew/json_fields.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;
using json_fields::ParseObject;

std::array<unsigned char, 32> Sha256(std::string_view text) {
  std::array<unsigned char, 32> out{};
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), out.data(), &length, EVP_sha256(), nullptr);
  return out;
}

std::string Hex(const unsigned char* data, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string Sha256Hex(std::string_view text) {
  auto h = Sha256(text);
  return Hex(h.data(), h.size());
}

std::string HashApiKey(std::string_view key) {
  return std::string(kKeyHashPrefix) + Sha256Hex(key);
}

Result<std::vector<KeyEntry>> ParseKeyTable(const std::map<std::string, std::string>& table,
                                            bool allow_plaintext, const std::string& where,
                                            size_t* plaintext) {
  std::vector<KeyEntry> out;
  size_t n = 0;
  for (const auto& [key, tenant] : table) {
    ++n;
    // Errors name the entry by position: the key may be a secret.
    const std::string entry = where + " entry " + std::to_string(n);
    if (tenant.empty()) return Status::InvalidArgument(entry + ": the tenant name is empty");
    KeyEntry e;
    e.tenant = tenant;
    if (key.rfind(kKeyHashPrefix, 0) == 0) {
      const std::string_view hex = std::string_view(key).substr(kKeyHashPrefix.size());
      if (hex.size() != 64) {
        return Status::InvalidArgument(
            entry + ": \"sha256:\" must be followed by 64 hex digits (sinew hash-key prints them)");
      }
      for (size_t i = 0; i < 32; ++i) {
        const int hi = HexValue(hex[2 * i]);
        const int lo = HexValue(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
          return Status::InvalidArgument(entry + ": \"sha256:\" must be followed by 64 hex digits");
        }
        e.hash[i] = static_cast<unsigned char>(hi * 16 + lo);
      }
    } else {
      if (!allow_plaintext) {
        return Status::InvalidArgument(
            entry + ": keys must be stored as \"sha256:<hex>\" (sinew hash-key KEY prints it)");
      }
      if (key.empty()) return Status::InvalidArgument(entry + ": the key is empty");
      e.hash = Sha256(key);
      if (plaintext != nullptr) ++*plaintext;
    }
    e.key_id = Hex(e.hash.data(), kKeyIdDigits / 2);
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<KeyEntry>> LoadKeysFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read API keys file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto root = ParseObject(ss.str(), "API keys file " + path);
  if (!root.ok()) return root.status();
  std::map<std::string, std::string> table;
  for (const auto& kv : *root) {
    if (!kv.value().is_string()) {
      return Status::InvalidArgument("API keys file " + path + ": values must be tenant names");
    }
    table[std::string(kv.key())] = std::string(kv.value().as_string());
  }
  return ParseKeyTable(table, false, "API keys file " + path, nullptr);
}

Result<std::unique_ptr<ApiKeys>> ApiKeys::Create(const HarnessConfig& config) {
  auto keys = std::unique_ptr<ApiKeys>(new ApiKeys());
  size_t plaintext = 0;
  SINEW_ASSIGN_OR_RETURN(keys->fixed_,
                         ParseKeyTable(config.api_keys, true, "config.api_keys", &plaintext));
  if (plaintext > 0) {
    spdlog::warn(
        "config.api_keys holds {} plaintext key(s): they work, but store \"sha256:<hex>\" instead "
        "(sinew hash-key KEY prints it; docs/security.md)",
        plaintext);
  }
  keys->file_ = config.api_keys_file;
  if (!keys->file_.empty()) {
    keys->stamp_ = StampOf(keys->file_);
    SINEW_ASSIGN_OR_RETURN(keys->from_file_, LoadKeysFile(keys->file_));
  }
  return keys;
}

ApiKeys::Stamp ApiKeys::StampOf(const std::string& path) {
  struct stat st {};
  Stamp s;
  if (::stat(path.c_str(), &st) != 0) return s;
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  s.size = static_cast<int64_t>(st.st_size);
  s.inode = static_cast<uint64_t>(st.st_ino);
  return s;
}

Status ApiKeys::Reload() {
  if (file_.empty()) return Status::Ok();
  const Stamp stamp = StampOf(file_);
  auto loaded = LoadKeysFile(file_);
  std::lock_guard<std::mutex> lock(mutex_);
  stamp_ = stamp;
  if (!loaded.ok()) return loaded.status();
  from_file_ = std::move(loaded).value();
  return Status::Ok();
}

void ApiKeys::ReloadIfChanged() {
  if (file_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (StampOf(file_) == stamp_) return;
  }
  Status s = Reload();
  if (s.ok()) {
    spdlog::info("API keys file {} re-read", file_);
  } else {
    spdlog::error(
        "API keys file {} changed but cannot be used ({}); the keys read before stay valid", file_,
        s.message());
  }
}

std::optional<Caller> ApiKeys::Match(std::string_view presented) {
  ReloadIfChanged();
  const auto hash = Sha256(presented);
  // Every stored hash is compared, in full, whatever matched before: no early exit.
  const KeyEntry* found = nullptr;
  auto scan = [&](const std::vector<KeyEntry>& entries) {
    for (const auto& e : entries) {
      const bool equal = CRYPTO_memcmp(e.hash.data(), hash.data(), hash.size()) == 0;
      found = equal ? &e : found;
    }
  };
  std::lock_guard<std::mutex> lock(mutex_);
  scan(fixed_);
  scan(from_file_);
  if (found == nullptr) return std::nullopt;
  return Caller{found->tenant, found->key_id};
}

}  // namespace sinew::harness
