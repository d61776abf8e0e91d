#include "webhook_signature.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <vector>

namespace sinew::harness {
namespace {

constexpr std::string_view kSecretPrefix = "whsec_";

std::string Base64(const unsigned char* data, size_t n) {
  std::string out(4 * ((n + 2) / 3), '\0');
  const int written =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(n));
  out.resize(static_cast<size_t>(written));
  return out;
}

// Strict base64 (padded) into *out; false when `text` is not base64.
bool Unbase64(std::string_view text, std::string* out) {
  if (text.empty() || text.size() % 4 != 0) return false;
  std::vector<unsigned char> buf(text.size() / 4 * 3);
  const int n = EVP_DecodeBlock(buf.data(), reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return false;
  size_t len = static_cast<size_t>(n);
  // EVP_DecodeBlock counts the padding as zero bytes.
  if (text.back() == '=') --len;
  if (text.size() >= 2 && text[text.size() - 2] == '=') --len;
  out->assign(reinterpret_cast<const char*>(buf.data()), len);
  return true;
}

Result<std::string> KeyOf(std::string_view secret) {
  std::string key;
  if (secret.substr(0, kSecretPrefix.size()) != kSecretPrefix ||
      !Unbase64(secret.substr(kSecretPrefix.size()), &key)) {
    return Status::InvalidArgument("a webhook secret is 'whsec_' followed by base64");
  }
  return key;
}

std::string Mac(const std::string& key, std::string_view id, int64_t timestamp,
                std::string_view body) {
  const std::string content =
      std::string(id) + "." + std::to_string(timestamp) + "." + std::string(body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(content.data()), content.size(), mac, &mac_len);
  return std::string(reinterpret_cast<const char*>(mac), mac_len);
}

}  // namespace

Result<std::string> NewWebhookSecret() {
  unsigned char raw[24];
  if (RAND_bytes(raw, sizeof raw) != 1) return Status::Internal("the random generator failed");
  return std::string(kSecretPrefix) + Base64(raw, sizeof raw);
}

Result<std::string> SignWebhook(std::string_view secret, std::string_view id, int64_t timestamp,
                                std::string_view body) {
  SINEW_ASSIGN_OR_RETURN(std::string key, KeyOf(secret));
  const std::string mac = Mac(key, id, timestamp, body);
  return "v1," + Base64(reinterpret_cast<const unsigned char*>(mac.data()), mac.size());
}

bool VerifyWebhook(std::string_view secret, std::string_view id, int64_t timestamp,
                   std::string_view body, std::string_view signature_header) {
  auto key = KeyOf(secret);
  if (!key.ok()) return false;
  const std::string mac = Mac(*key, id, timestamp, body);
  size_t pos = 0;
  while (pos < signature_header.size()) {
    size_t end = signature_header.find(' ', pos);
    if (end == std::string_view::npos) end = signature_header.size();
    std::string_view one = signature_header.substr(pos, end - pos);
    pos = end + 1;
    std::string got;
    if (one.substr(0, 3) != "v1," || !Unbase64(one.substr(3), &got)) continue;
    if (got.size() == mac.size() && CRYPTO_memcmp(got.data(), mac.data(), mac.size()) == 0)
      return true;
  }
  return false;
}

}  // namespace sinew::harness
