// Where a tenant's webhooks may go: http or https URLs whose host is not loopback,
// private, link-local, unspecified, multicast or otherwise reserved (IPv4 and IPv6, IPv4
// inside IPv6 included), unless the tenant's config allows it (`webhook_allow_private`,
// or a host or CIDR in `webhook_allow`). The host is checked when the endpoint is
// created and its addresses again at each delivery (a name may resolve elsewhere later);
// a delivery connects only to the addresses checked (libcurl's resolve list).
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include <string>
#include <vector>

#include "sinew/status.h"

namespace sinew::harness {

struct WebhookUrlPolicy {
  // Any address is allowed. Default: false
  bool allow_private = false;
  // Host names (lower case, exact), IP addresses and CIDRs ("10.0.0.0/8", "fd00::/8")
  // allowed even though private. Default: none
  std::vector<std::string> allow;
};

// OK when `entry` is a host name, an IP address or a CIDR; kInvalidArgument naming `where`.
[[nodiscard]] Status CheckWebhookAllowEntry(const std::string& entry, const std::string& where);

struct WebhookTarget {
  std::string host;  // without IPv6 brackets, lower case
  std::string port;
};

// Checks a URL an endpoint is created with. Errors: kInvalidArgument saying why (not
// http(s), user info, a refused address).
[[nodiscard]] Result<WebhookTarget> CheckWebhookUrl(const std::string& url,
                                                    const WebhookUrlPolicy& policy);

// Resolves `target` now and checks every address. Returns the libcurl resolve entry
// "host:port:addr[,addr...]" that pins the delivery to them. Errors: kUnavailable (the
// name does not resolve), kPermissionDenied (an address is refused).
[[nodiscard]] Result<std::string> ResolveWebhookTarget(const WebhookTarget& target,
                                                       const WebhookUrlPolicy& policy);

}  // namespace sinew::harness
