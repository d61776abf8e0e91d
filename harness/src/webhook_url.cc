#include "webhook_url.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <optional>

#include "sinew/http/url.h"

namespace sinew::harness {
namespace {

// An address as 16 bytes (IPv4 as ::ffff:a.b.c.d).
using Addr = std::array<unsigned char, 16>;

std::optional<Addr> ParseAddr(const std::string& text) {
  Addr a{};
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    a[10] = a[11] = 0xff;
    std::memcpy(a.data() + 12, &v4, 4);
    return a;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    std::memcpy(a.data(), &v6, 16);
    return a;
  }
  return std::nullopt;
}

bool InPrefix(const Addr& a, const Addr& net, int bits) {
  for (int i = 0; i < 16 && bits > 0; ++i, bits -= 8) {
    const unsigned mask = bits >= 8 ? 0xffu : (0xffu << (8 - bits)) & 0xffu;
    if ((a[static_cast<size_t>(i)] & mask) != (net[static_cast<size_t>(i)] & mask)) return false;
  }
  return true;
}

bool InV4(const Addr& a, unsigned char b0, unsigned char b1, int bits) {
  Addr net{};
  net[10] = net[11] = 0xff;
  net[12] = b0;
  net[13] = b1;
  return InPrefix(a, net, 96 + bits);
}

bool IsV4Mapped(const Addr& a) {
  for (int i = 0; i < 10; ++i) {
    if (a[static_cast<size_t>(i)] != 0) return false;
  }
  return a[10] == 0xff && a[11] == 0xff;
}

// Loopback, private, link-local, unspecified, multicast, shared (CGNAT), benchmarking and
// reserved ranges: nowhere a tenant's webhook may go by default.
bool IsRefusedRange(Addr a) {
  // NAT64 (64:ff9b::/96) and IPv4-compatible (::/96) addresses carry an IPv4 address.
  Addr nat64{0x00, 0x64, 0xff, 0x9b};
  Addr zero{};
  if (InPrefix(a, nat64, 96) ||
      (InPrefix(a, zero, 96) && !(a[12] == 0 && a[13] == 0 && a[14] == 0 && a[15] <= 1))) {
    std::fill(a.begin(), a.begin() + 10, 0);
    a[10] = a[11] = 0xff;
  }
  if (IsV4Mapped(a)) {
    return InV4(a, 0, 0, 8) || InV4(a, 10, 0, 8) || InV4(a, 100, 64, 10) || InV4(a, 127, 0, 8) ||
           InV4(a, 169, 254, 16) || InV4(a, 172, 16, 12) || InV4(a, 192, 168, 16) ||
           InV4(a, 192, 0, 24) || InV4(a, 198, 18, 15) || InV4(a, 224, 0, 4) || InV4(a, 240, 0, 4);
  }
  if (a == zero) return true;  // ::
  Addr one{};
  one[15] = 1;
  if (a == one) return true;                               // ::1
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) return true;  // fe80::/10 link-local
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0) return true;  // fec0::/10 site-local (deprecated)
  if ((a[0] & 0xfe) == 0xfc) return true;                  // fc00::/7 unique local
  if (a[0] == 0xff) return true;                           // ff00::/8 multicast
  return false;
}

// An allow entry as a network: an address (all bits) or a CIDR.
std::optional<std::pair<Addr, int>> ParseNet(const std::string& entry) {
  const size_t slash = entry.find('/');
  auto addr = ParseAddr(entry.substr(0, slash));
  if (!addr) return std::nullopt;
  const bool v4 = entry.substr(0, slash).find(':') == std::string::npos;
  int bits = v4 ? 32 : 128;
  if (slash != std::string::npos) {
    const std::string b = entry.substr(slash + 1);
    if (b.empty() || b.size() > 3 ||
        !std::all_of(b.begin(), b.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::nullopt;
    }
    bits = std::stoi(b);
    if (bits > (v4 ? 32 : 128)) return std::nullopt;
  }
  return std::pair{*addr, v4 ? bits + 96 : bits};
}

bool IsHostName(const std::string& h) {
  if (h.empty() || h.size() > 253) return false;
  return std::all_of(h.begin(), h.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
  });
}

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool Allowed(const std::string& host, const Addr* addr, const WebhookUrlPolicy& policy) {
  if (policy.allow_private) return true;
  for (const auto& entry : policy.allow) {
    if (entry == host) return true;
    if (addr == nullptr) continue;
    auto net = ParseNet(entry);
    if (net && InPrefix(*addr, net->first, net->second)) return true;
  }
  return false;
}

std::string Refusal(const std::string& host, const std::string& what) {
  return "webhook host '" + host + "' is " + what +
         "; this tenant may not send webhooks there (config.tenants.<tenant>.webhook_allow_private "
         "or webhook_allow)";
}

}  // namespace

Status CheckWebhookAllowEntry(const std::string& entry, const std::string& where) {
  if (ParseNet(entry) || (entry.find('/') == std::string::npos && IsHostName(entry)))
    return Status::Ok();
  return Status::InvalidArgument(
      where + " must be a lower-case host name, an IP address or a CIDR, not '" + entry + "'");
}

Result<WebhookTarget> CheckWebhookUrl(const std::string& url, const WebhookUrlPolicy& policy) {
  if (url.size() > 2048) return Status::InvalidArgument("body.url is longer than 2048 bytes");
  if (url.find_first_of(" \t\r\n\"'<>\\") != std::string::npos ||
      std::any_of(url.begin(), url.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    return Status::InvalidArgument(
        "body.url must not contain spaces, quotes or control characters");
  }
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
    return Status::InvalidArgument("body.url must be an http:// or https:// URL");
  }
  auto parts = http::ParseUrl(url);
  if (!parts.ok()) return Status::InvalidArgument("body.url does not parse as a URL");
  if (!parts->user.empty())
    return Status::InvalidArgument("body.url must not carry user info (user@host)");
  WebhookTarget t;
  t.host = Lower(parts->host);
  if (t.host.size() >= 2 && t.host.front() == '[' && t.host.back() == ']')
    t.host = t.host.substr(1, t.host.size() - 2);
  t.port = parts->port;
  if (t.host.empty()) return Status::InvalidArgument("body.url has no host");
  if (auto addr = ParseAddr(t.host)) {
    if (IsRefusedRange(*addr) && !Allowed(t.host, &*addr, policy)) {
      return Status::InvalidArgument(
          Refusal(t.host, "a loopback, private, link-local or reserved address"));
    }
    return t;
  }
  if (!IsHostName(t.host))
    return Status::InvalidArgument("body.url's host '" + t.host + "' is not a host name");
  const bool local =
      t.host == "localhost" || (t.host.size() > 10 && t.host.ends_with(".localhost"));
  if (local && !Allowed(t.host, nullptr, policy))
    return Status::InvalidArgument(Refusal(t.host, "loopback"));
  return t;
}

Result<std::string> ResolveWebhookTarget(const WebhookTarget& target,
                                         const WebhookUrlPolicy& policy) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(target.host.c_str(), target.port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return Status::Unavailable("webhook host '" + target.host +
                               "' does not resolve: " + gai_strerror(rc));
  }
  std::string addrs;
  Status refused = Status::Ok();
  for (addrinfo* p = res; p != nullptr; p = p->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    if (p->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(p->ai_addr)->sin_addr, text, sizeof text);
    } else if (p->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(p->ai_addr)->sin6_addr, text,
                sizeof text);
    } else {
      continue;
    }
    auto addr = ParseAddr(text);
    if (!addr) continue;
    if (IsRefusedRange(*addr) && !Allowed(target.host, &*addr, policy)) {
      refused = Status::PermissionDenied(Refusal(target.host, std::string("resolved to ") + text));
      break;
    }
    const std::string one =
        p->ai_family == AF_INET6 ? "[" + std::string(text) + "]" : std::string(text);
    if (addrs.find(one) == std::string::npos) addrs += (addrs.empty() ? "" : ",") + one;
  }
  freeaddrinfo(res);
  if (!refused.ok()) return refused;
  if (addrs.empty())
    return Status::Unavailable("webhook host '" + target.host + "' has no address");
  return target.host + ":" + target.port + ":" + addrs;
}

}  // namespace sinew::harness
