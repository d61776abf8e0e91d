// The JSON-schema compiler and matcher (model-backend/src/serving: JsonSchema::Compile,
// JsonMatcher, MakeJsonSchemaConstraint, MakeFramedJsonConstraint). Input: a schema (JSON),
// a NUL byte, then text to match. The text is fed to a matcher byte by byte, and to the
// token constraints over a table of every single byte plus some multi-byte pieces: a byte
// the matcher accepts must be a token the constraint leaves unmasked.
#include <boost/json.hpp>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "json_matcher.h"
#include "sinew/model/constraint.h"

namespace {

using namespace sinew::model;

std::shared_ptr<const TokenTable> Table() {
  auto table = std::make_shared<TokenTable>();
  for (int c = 0; c < 256; ++c) table->pieces.push_back(std::string(1, static_cast<char>(c)));
  for (const char* p : {"true", "false", "null", "{\"", "\":", "\",\"", "\"}", "},", "[]", "12", "0.5", "e+"}) {
    table->pieces.push_back(p);
  }
  table->pieces.push_back("");          // an empty piece is never allowed
  table->eog_ids = {256 + 13, 100000};  // one out of range: ignored
  return table;
}

// Feeds `text` to `constraint` as single-byte tokens while `matcher` accepts it.
void Drive(TokenConstraint& constraint, JsonMatcher& matcher, std::string_view text,
           size_t n_tokens) {
  std::vector<float> logits(n_tokens);
  for (char c : text.substr(0, 64)) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    constraint.Mask(logits);
    const bool accepted = matcher.Feed(c);
    const bool unmasked = std::isfinite(logits[static_cast<unsigned char>(c)]);
    if (accepted != unmasked) sinew::fuzz::Violated("the constraint and the matcher disagree on a byte");
    if (!accepted) return;
    constraint.Accept(static_cast<unsigned char>(c));
    if (constraint.Complete() != matcher.Complete()) sinew::fuzz::Violated("Complete() disagrees");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::shared_ptr<const TokenTable> table = Table();
  const auto [schema_text, text] = sinew::fuzz::SplitAt(sinew::fuzz::Bytes(data, size), std::string_view("\0", 1));
  boost::system::error_code ec;
  boost::json::parse_options options;
  options.max_depth = 64;
  boost::json::value schema = boost::json::parse(schema_text, ec, boost::json::storage_ptr(), options);
  if (ec) return 0;
  auto compiled = JsonSchema::Compile(schema);
  if (!compiled.ok()) {
    if (compiled.status().message().empty()) sinew::fuzz::Violated("a refused schema has no message");
    return 0;
  }
  JsonMatcher matcher(*compiled);
  for (char c : text) {
    if (!matcher.Feed(c)) break;
  }
  (void)matcher.Complete();
  (void)matcher.CanContinue();

  auto constraint = MakeJsonSchemaConstraint(schema, table);
  if (!constraint.ok()) sinew::fuzz::Violated("a schema that compiles makes no constraint");
  JsonMatcher again(*compiled);
  Drive(**constraint, again, text, table->pieces.size());

  // Framed, as tool calls are: <tool_call>{...}</tool_call>
  auto framed = MakeFramedJsonConstraint({FramedJson{"<tool_call>", schema, "</tool_call>"},
                                          FramedJson{"", schema, ""}},
                                         table);
  if (!framed.ok()) sinew::fuzz::Violated("a schema that compiles makes no framed constraint");
  std::vector<float> logits(table->pieces.size());
  for (char c : text.substr(0, 32)) {
    (*framed)->Mask(logits);
    if (!std::isfinite(logits[static_cast<unsigned char>(c)])) break;
    (*framed)->Accept(static_cast<unsigned char>(c));
    (void)(*framed)->CanContinue();
  }
  return 0;
}
