// Grammar-constrained decoding: a TokenConstraint masks the logits of every
// token that cannot continue a valid output, so the sampler can only pick
// tokens that keep it valid, whatever the weights say.
//
// MakeJsonSchemaConstraint() compiles a JSON schema into such a mask engine.
// Its output is compact JSON (no whitespace outside strings, object properties
// in schema order) that parses and validates against the schema. Supported:
// type object (properties, required; other properties are never produced),
// array (items, minItems, maxItems), string (minLength, maxLength, enum),
// number, integer, boolean, null, enum and const of any JSON values, anyOf /
// oneOf, type lists such as ["string", "null"]. A schema without a type gives
// a string, number, boolean or null. Limits keep every output finite: strings
// are at most 64 characters unless maxLength says otherwise (printable ASCII
// and the escapes \" \\ \n \t), arrays at most 8 items unless maxItems says
// otherwise, numbers at most 15 digits; nesting at most 16 levels. Unsupported
// keywords ($ref, patternProperties, ...) are InvalidArgument.
//
// Thread-safety: a TokenConstraint is used by one generation at a time;
// TokenTable is immutable and shared.
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sinew/status.h"

namespace sinew::model {

// The bytes of every token (empty for control tokens) and which tokens end a
// generation.
struct TokenTable {
  std::vector<std::string> pieces;
  std::vector<int32_t> eog_ids;
};

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logits of tokens that may not come next to -infinity.
  // End-of-generation tokens are allowed exactly when the output is complete.
  virtual void Mask(std::span<float> logits) = 0;
  // Advances past `token` (one that Mask() allowed).
  virtual void Accept(int32_t token) = 0;
  // The output so far is complete and valid.
  virtual bool Complete() const = 0;
  // Some token could still extend the output (false: generation must end).
  virtual bool CanContinue() const = 0;
};

// Errors: InvalidArgument naming the unsupported or malformed part of `schema`.
[[nodiscard]] Result<std::unique_ptr<TokenConstraint>> MakeJsonSchemaConstraint(
    const boost::json::value& schema, std::shared_ptr<const TokenTable> tokens);

// One alternative of a framed output: the literal `lead`, then compact JSON of
// `schema`, then the literal `trail` (e.g. a forced tool call in a family's own syntax:
// lead "get_weather>" then the arguments object, for Functionary's <function=...>).
struct FramedJson {
  std::string lead;
  boost::json::value schema;
  std::string trail;
};

// The output is exactly one of `alternatives` (chosen by the model, byte by byte).
// Errors: InvalidArgument if there are none or a schema is unsupported.
[[nodiscard]] Result<std::unique_ptr<TokenConstraint>> MakeFramedJsonConstraint(
    const std::vector<FramedJson>& alternatives, std::shared_ptr<const TokenTable> tokens);

}  // namespace sinew::model
