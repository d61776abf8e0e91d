// MakeJsonSchemaConstraint: the JsonMatcher applied to whole tokens.
#include <algorithm>
#include <cmath>

#include "json_matcher.h"
#include "sinew/model/constraint.h"

namespace sinew::model {
namespace {

class JsonSchemaConstraint final : public TokenConstraint {
 public:
  JsonSchemaConstraint(std::shared_ptr<const JsonSchema> schema,
                       std::shared_ptr<const TokenTable> tokens)
      : tokens_(std::move(tokens)), matcher_(std::move(schema)) {}

  void Mask(std::span<float> logits) override {
    // Bytes that may come next at all: most tokens fail on their first byte.
    bool first_ok[256] = {};
    for (int c = 0; c < 256; ++c) {
      JsonMatcher probe = matcher_;
      first_ok[c] = probe.Feed(static_cast<char>(c));
    }
    const bool complete = matcher_.Complete();
    // End-of-generation tokens: allowed (with their own logit) once complete.
    std::vector<float> eog_logits;
    for (int32_t eog : tokens_->eog_ids) {
      const bool in = eog >= 0 && static_cast<size_t>(eog) < logits.size();
      eog_logits.push_back(in ? logits[static_cast<size_t>(eog)] : 0.0f);
    }
    const size_t n = std::min(logits.size(), tokens_->pieces.size());
    for (size_t id = 0; id < logits.size(); ++id) {
      bool allowed = false;
      if (id < n) {
        const std::string& piece = tokens_->pieces[id];
        if (!piece.empty() && first_ok[static_cast<unsigned char>(piece[0])]) {
          if (piece.size() == 1) {
            allowed = true;
          } else {
            JsonMatcher probe = matcher_;
            allowed = probe.FeedAll(piece);
          }
        }
      }
      if (!allowed) logits[id] = -INFINITY;
    }
    for (size_t i = 0; i < tokens_->eog_ids.size(); ++i) {
      const int32_t eog = tokens_->eog_ids[i];
      if (eog >= 0 && static_cast<size_t>(eog) < logits.size()) {
        logits[static_cast<size_t>(eog)] = complete ? eog_logits[i] : -INFINITY;
      }
    }
  }

  void Accept(int32_t token) override {
    if (token < 0 || static_cast<size_t>(token) >= tokens_->pieces.size()) return;
    matcher_.FeedAll(tokens_->pieces[static_cast<size_t>(token)]);
  }
  bool Complete() const override { return matcher_.Complete(); }
  bool CanContinue() const override { return matcher_.CanContinue(); }

 private:
  std::shared_ptr<const TokenTable> tokens_;
  JsonMatcher matcher_;
};

}  // namespace

Result<std::unique_ptr<TokenConstraint>> MakeJsonSchemaConstraint(
    const boost::json::value& schema, std::shared_ptr<const TokenTable> tokens) {
  if (tokens == nullptr) return Status::InvalidArgument("json schema constraint: no token table");
  SINEW_ASSIGN_OR_RETURN(std::shared_ptr<const JsonSchema> compiled, JsonSchema::Compile(schema));
  return std::unique_ptr<TokenConstraint>(
      new JsonSchemaConstraint(std::move(compiled), std::move(tokens)));
}

}  // namespace sinew::model
