#include "sinew/harness/vault.h"

#include <vector>

namespace sinew::harness {
namespace {

class MapVault final : public Vault {
 public:
  explicit MapVault(const std::map<std::string, std::string>& secrets) {
    for (const auto& [name, value] : secrets) {
      if (!value.empty()) secrets_.emplace_back(name, value);
    }
  }

  std::optional<std::string> Get(std::string_view name) const override {
    for (const auto& [n, v] : secrets_) {
      if (n == name) return v;
    }
    return std::nullopt;
  }

  std::string Redact(std::string_view text) const override {
    std::string out(text);
    for (const auto& [name, value] : secrets_) {
      const std::string mark = "[REDACTED:" + name + "]";
      size_t pos = 0;
      while ((pos = out.find(value, pos)) != std::string::npos) {
        out.replace(pos, value.size(), mark);
        pos += mark.size();
      }
    }
    return out;
  }

  bool Contains(std::string_view text) const override {
    for (const auto& [name, value] : secrets_) {
      if (text.find(value) != std::string_view::npos) return true;
    }
    return false;
  }

 private:
  std::vector<std::pair<std::string, std::string>> secrets_;  // constant after construction
};

}  // namespace

std::unique_ptr<Vault> Vault::Create(const std::map<std::string, std::string>& secrets) {
  return std::make_unique<MapVault>(secrets);
}

}  // namespace sinew::harness
