// Webhook signatures as the Standard Webhooks convention defines them: a secret
// "whsec_<base64 key>", and for each delivery the headers webhook-id, webhook-timestamp
// (unix seconds) and webhook-signature "v1,<base64 HMAC-SHA256 of '{id}.{timestamp}.{body}'>"
// (several space-separated signatures may be sent during a secret rotation).
// HMAC and base64 are OpenSSL's.
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sinew/status.h"

namespace sinew::harness {

// A fresh secret: "whsec_" + base64 of 24 random bytes (OpenSSL's RAND_bytes).
// Errors: kInternal when the random generator fails.
[[nodiscard]] Result<std::string> NewWebhookSecret();

// The webhook-signature header value "v1,<base64>" for one delivery.
// Errors: kInvalidArgument when `secret` is not "whsec_" + base64.
[[nodiscard]] Result<std::string> SignWebhook(std::string_view secret, std::string_view id,
                                              int64_t timestamp, std::string_view body);

// True when one of the space-separated "v1,<base64>" signatures of `signature_header` is
// the signature of (id, timestamp, body) under `secret` (compared in constant time).
bool VerifyWebhook(std::string_view secret, std::string_view id, int64_t timestamp,
                   std::string_view body, std::string_view signature_header);

}  // namespace sinew::harness
