// sinew hash-key: prints the "sha256:<hex>" form of an API key for the harness's
// config.api_keys or api_keys_file (docs/security.md). Local: talks to no server.
#include <openssl/evp.h>

#include <boost/json.hpp>
#include <iostream>
#include <string>

#include "context.h"

namespace sinew::cli {

std::string HashApiKeyForConfig(const std::string& key) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(key.data(), key.size(), digest, &length, EVP_sha256(), nullptr);
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out = "sha256:";
  for (unsigned int i = 0; i < length; ++i) {
    out += kDigits[digest[i] >> 4];
    out += kDigits[digest[i] & 0xf];
  }
  return out;
}

void AddKeyCommands(CLI::App& app, Context& ctx) {
  auto key = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "hash-key",
      "print the sha256:<hex> form of an API key for the harness config (reads stdin without KEY)");
  cmd->add_option("key", *key,
                  "the API key (omit it to read one line from stdin, out of the shell history)");
  cmd->callback([&ctx, key] {
    std::string text = *key;
    if (text.empty() || text == "-") {
      if (!std::getline(std::cin, text)) text.clear();
      if (!text.empty() && text.back() == '\r') text.pop_back();
    }
    if (text.empty())
      return ctx.Fail(Status::InvalidArgument("no key given (pass KEY or one line on stdin)"));
    const std::string hashed = HashApiKeyForConfig(text);
    if (ctx.json) {
      std::cout << boost::json::serialize(boost::json::object{{"key_hash", hashed}}) << "\n";
    } else {
      std::cout << hashed << "\n";
    }
  });
}

}  // namespace sinew::cli
