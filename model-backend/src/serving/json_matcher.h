// JsonMatcher: a character-level pushdown automaton for the compact JSON that a
// compiled JSON schema accepts (see sinew/model/constraint.h for the subset).
// Nondeterministic where the schema is (anyOf, enums that prefix each other,
// numbers that may end or go on): it tracks every live parse stack.
//
// Thread-safety: a JsonSchema is immutable; a JsonMatcher is a value used from
// one thread.
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sinew/status.h"

namespace sinew::model {

struct SchemaNode {
  enum class Kind { kObject, kArray, kString, kNumber, kInteger, kLiterals, kAnyOf };
  Kind kind = Kind::kLiterals;
  std::vector<std::string> names;    // object: property names, schema order
  std::vector<int32_t> children;     // object: property nodes; anyOf: options
  std::vector<bool> required;        // object: per property
  int32_t items = -1;                // array: node of the items
  int32_t min_count = 0;             // array: minItems; string: minLength
  int32_t max_count = 0;             // array: maxItems; string: maxLength
  std::vector<std::string> literals;  // compact JSON texts (enum, const, boolean, null)
};

class JsonSchema {
 public:
  static constexpr int32_t kDefaultMaxString = 64;
  static constexpr int32_t kDefaultMaxItems = 8;
  static constexpr int32_t kMaxDepth = 16;

  // Errors: InvalidArgument naming what is unsupported or malformed.
  [[nodiscard]] static Result<std::shared_ptr<const JsonSchema>> Compile(
      const boost::json::value& schema);

  const SchemaNode& node(int32_t i) const { return nodes_[static_cast<size_t>(i)]; }
  int32_t root() const { return 0; }

 private:
  Result<int32_t> Add(const boost::json::value& schema, int depth);
  std::vector<SchemaNode> nodes_;
};

class JsonMatcher {
 public:
  explicit JsonMatcher(std::shared_ptr<const JsonSchema> schema);

  // Feeds one byte; false (and no change) if no parse accepts it.
  bool Feed(char c);
  // Feeds every byte; false (and no change) if any is rejected.
  bool FeedAll(std::string_view text);
  // Some parse is a complete value.
  bool Complete() const;
  // Some parse can take another byte.
  bool CanContinue() const;
  // No parse is alive.
  bool Dead() const { return stacks_.empty(); }

 private:
  struct Frame {
    int32_t node = 0;
    int32_t stage = 0;  // kind-specific progress
    int32_t index = 0;  // object: next property; array: items so far; string: length
    int32_t chosen = -1;  // object: property whose key is being read
    std::string buf;      // key, literal or number read so far
    bool operator==(const Frame&) const = default;
  };
  using Stack = std::vector<Frame>;

  // `stack` with `node` pushed, one stack per anyOf branch.
  void Push(Stack stack, int32_t node, std::vector<Stack>& out) const;
  // Every successor of `stack` after byte c.
  void Step(const Stack& stack, char c, std::vector<Stack>& out) const;
  // Feeds c to the top frame in place; false if rejected. May push children
  // (into `out` directly, for the anyOf fan-out).
  bool FeedTop(Stack stack, char c, std::vector<Stack>& out) const;
  bool CanEnd(const Frame& f) const;
  bool CanTake(const Stack& stack) const;

  std::shared_ptr<const JsonSchema> schema_;
  std::vector<Stack> stacks_;
};

}  // namespace sinew::model
