// MakeJsonSchemaConstraint and MakeFramedJsonConstraint: a byte matcher (JsonMatcher,
// or FramedMatcher around JsonMatchers) applied to whole tokens.
#include <algorithm>
#include <cmath>

#include "json_matcher.h"
#include "sinew/model/constraint.h"

namespace sinew::model {
namespace {

// Literal lead, a JSON value, literal trail; several alternatives matched in parallel.
// Same interface as JsonMatcher (Feed, FeedAll, Complete, CanContinue).
class FramedMatcher {
 public:
  struct Alternative {
    std::string lead;
    std::shared_ptr<const JsonSchema> schema;
    std::string trail;
  };
  explicit FramedMatcher(std::shared_ptr<const std::vector<Alternative>> alternatives)
      : alternatives_(std::move(alternatives)) {
    for (size_t i = 0; i < alternatives_->size(); ++i) {
      const Alternative& a = (*alternatives_)[i];
      states_.push_back({i, a.lead.empty() ? Phase::kJson : Phase::kLead, 0, JsonMatcher(a.schema)});
    }
  }

  bool Feed(char c) {
    std::vector<State> next;
    for (const State& s : states_) {
      const Alternative& a = (*alternatives_)[s.alternative];
      if (s.phase == Phase::kLead) {
        if (a.lead[s.pos] != c) continue;
        State n = s;
        if (++n.pos == a.lead.size()) {
          n.phase = Phase::kJson;
          n.pos = 0;
        }
        next.push_back(std::move(n));
      } else if (s.phase == Phase::kJson) {
        State n = s;
        if (n.json.Feed(c)) next.push_back(std::move(n));
        // A complete value may end here and the trail begin.
        if (s.json.Complete() && !a.trail.empty() && a.trail[0] == c) {
          next.push_back({s.alternative, Phase::kTrail, 1, s.json});
        }
      } else if (s.pos < a.trail.size() && a.trail[s.pos] == c) {
        State n = s;
        ++n.pos;
        next.push_back(std::move(n));
      }
    }
    if (next.empty()) return false;
    states_ = std::move(next);
    return true;
  }
  bool FeedAll(std::string_view text) {
    FramedMatcher copy = *this;
    for (char c : text) {
      if (!copy.Feed(c)) return false;
    }
    *this = std::move(copy);
    return true;
  }
  bool Complete() const {
    for (const State& s : states_) {
      const Alternative& a = (*alternatives_)[s.alternative];
      if (s.phase == Phase::kTrail && s.pos == a.trail.size()) return true;
      if (s.phase == Phase::kJson && a.trail.empty() && s.json.Complete()) return true;
    }
    return false;
  }
  bool CanContinue() const {
    for (const State& s : states_) {
      const Alternative& a = (*alternatives_)[s.alternative];
      if (s.phase == Phase::kLead) return true;
      if (s.phase == Phase::kJson &&
          (s.json.CanContinue() || (s.json.Complete() && !a.trail.empty()))) {
        return true;
      }
      if (s.phase == Phase::kTrail && s.pos < a.trail.size()) return true;
    }
    return false;
  }

 private:
  enum class Phase { kLead, kJson, kTrail };
  struct State {
    size_t alternative;
    Phase phase;
    size_t pos;  // bytes of lead or trail matched
    JsonMatcher json;
  };
  std::shared_ptr<const std::vector<Alternative>> alternatives_;
  std::vector<State> states_;
};

template <typename Matcher>
class MatcherConstraint final : public TokenConstraint {
 public:
  MatcherConstraint(Matcher matcher, std::shared_ptr<const TokenTable> tokens)
      : tokens_(std::move(tokens)), matcher_(std::move(matcher)) {}

  void Mask(std::span<float> logits) override {
    // Bytes that may come next at all: most tokens fail on their first byte.
    bool first_ok[256] = {};
    for (int c = 0; c < 256; ++c) {
      Matcher probe = matcher_;
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
            Matcher probe = matcher_;
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
  Matcher matcher_;
};

}  // namespace

Result<std::unique_ptr<TokenConstraint>> MakeJsonSchemaConstraint(
    const boost::json::value& schema, std::shared_ptr<const TokenTable> tokens) {
  if (tokens == nullptr) return Status::InvalidArgument("json schema constraint: no token table");
  SINEW_ASSIGN_OR_RETURN(std::shared_ptr<const JsonSchema> compiled, JsonSchema::Compile(schema));
  return std::unique_ptr<TokenConstraint>(
      new MatcherConstraint<JsonMatcher>(JsonMatcher(std::move(compiled)), std::move(tokens)));
}

Result<std::unique_ptr<TokenConstraint>> MakeFramedJsonConstraint(
    const std::vector<FramedJson>& alternatives, std::shared_ptr<const TokenTable> tokens) {
  if (tokens == nullptr) return Status::InvalidArgument("framed json constraint: no token table");
  if (alternatives.empty()) return Status::InvalidArgument("framed json constraint: no alternatives");
  auto compiled = std::make_shared<std::vector<FramedMatcher::Alternative>>();
  for (const FramedJson& a : alternatives) {
    SINEW_ASSIGN_OR_RETURN(std::shared_ptr<const JsonSchema> schema, JsonSchema::Compile(a.schema));
    compiled->push_back({a.lead, std::move(schema), a.trail});
  }
  return std::unique_ptr<TokenConstraint>(new MatcherConstraint<FramedMatcher>(
      FramedMatcher(std::move(compiled)), std::move(tokens)));
}

}  // namespace sinew::model
