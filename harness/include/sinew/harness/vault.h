// Vault: the harness's secrets. Values never leave the harness except as a credential
// injected into an allowed proxy request; Redact() scrubs them from anything that is
// logged or written to the session log.
//
// Thread-safety: immutable after construction; every method may be called concurrently.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace sinew::harness {

class Vault {
 public:
  virtual ~Vault() = default;
  // `secrets`: name -> value. Empty values are ignored.
  static std::unique_ptr<Vault> Create(const std::map<std::string, std::string>& secrets);
  // The value of a secret, or nullopt.
  virtual std::optional<std::string> Get(std::string_view name) const = 0;
  // `text` with every occurrence of every secret value replaced by "[REDACTED:name]".
  virtual std::string Redact(std::string_view text) const = 0;
  // True when `text` contains a secret value.
  virtual bool Contains(std::string_view text) const = 0;
};

}  // namespace sinew::harness
