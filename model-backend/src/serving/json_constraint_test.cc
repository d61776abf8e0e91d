// Grammar-constrained decoding: the matcher accepts exactly the compact JSON of
// a schema, and random-weight models (which would otherwise emit garbage)
// always produce output that parses and validates against its schema, checked
// by an independent validator below.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "json_matcher.h"
#include "random_model.h"
#include "serving_test_device.h"
#include "sinew/model/constraint.h"
#include "sinew/model/serving.h"
#include "sinew/model/tokenizer.h"
#include "test_util.h"

namespace sinew::model {
namespace {

namespace json = boost::json;

// An independent check of `v` against the schema subset (not the matcher).
bool Valid(const json::value& v, const json::value& schema) {
  if (schema.is_bool()) return v.is_string() || v.is_number() || v.is_bool() || v.is_null();
  const json::object& s = schema.as_object();
  if (const auto* e = s.if_contains("enum")) {
    for (const auto& option : e->as_array()) {
      if (option == v) return true;
    }
    return false;
  }
  if (const auto* c = s.if_contains("const")) return *c == v;
  for (const char* key : {"anyOf", "oneOf"}) {
    if (const auto* a = s.if_contains(key)) {
      for (const auto& option : a->as_array()) {
        if (Valid(v, option)) return true;
      }
      return false;
    }
  }
  const auto* type = s.if_contains("type");
  if (type != nullptr && type->is_array()) {
    for (const auto& t : type->as_array()) {
      json::object copy = s;
      copy["type"] = t;
      if (Valid(v, copy)) return true;
    }
    return false;
  }
  const std::string t = type != nullptr ? std::string(type->as_string()) : "";
  if (t == "object") {
    if (!v.is_object()) return false;
    const json::object& props = s.at("properties").as_object();
    for (const auto& kv : v.as_object()) {
      if (!props.contains(kv.key()) || !Valid(kv.value(), props.at(kv.key()))) return false;
    }
    if (const auto* r = s.if_contains("required")) {
      for (const auto& name : r->as_array()) {
        if (!v.as_object().contains(name.as_string())) return false;
      }
    }
    return true;
  }
  if (t == "array") {
    if (!v.is_array()) return false;
    const auto n = static_cast<int64_t>(v.as_array().size());
    if (s.contains("minItems") && n < s.at("minItems").as_int64()) return false;
    if (s.contains("maxItems") && n > s.at("maxItems").as_int64()) return false;
    for (const auto& item : v.as_array()) {
      if (!Valid(item, s.at("items"))) return false;
    }
    return true;
  }
  if (t == "string") {
    if (!v.is_string()) return false;
    const auto n = static_cast<int64_t>(v.as_string().size());
    if (s.contains("minLength") && n < s.at("minLength").as_int64()) return false;
    return !(s.contains("maxLength") && n > s.at("maxLength").as_int64());
  }
  if (t == "integer") return v.is_int64() || v.is_uint64();
  if (t == "number") return v.is_number();
  if (t == "boolean") return v.is_bool();
  if (t == "null") return v.is_null();
  return false;
}

const char* kSchemas[] = {
    // Tool arguments: required and optional properties, enum, number.
    R"({"type":"object","properties":{"city":{"type":"string","maxLength":12},
        "unit":{"enum":["celsius","fahrenheit"]},"days":{"type":"integer"},
        "detailed":{"type":"boolean"}},"required":["city","unit"]})",
    // Nested objects, arrays, numbers, nullable strings.
    R"({"type":"object","properties":{
        "name":{"type":"string","minLength":1,"maxLength":8},
        "scores":{"type":"array","items":{"type":"number"},"minItems":1,"maxItems":3},
        "owner":{"type":"object","properties":{"id":{"type":"integer"},
                 "tags":{"type":"array","items":{"type":"string","maxLength":5},"maxItems":2}},
                 "required":["id"]},
        "note":{"type":["string","null"],"maxLength":6}},
        "required":["name","scores","owner"]})",
    // A top-level array of anyOf.
    R"({"type":"array","items":{"anyOf":[{"type":"integer"},{"const":"x"},{"type":"boolean"}]},
        "maxItems":4})",
};

TEST(JsonMatcher, AcceptsTheSchemaLanguageAndNothingElse) {
  auto schema = JsonSchema::Compile(json::parse(kSchemas[0]));
  ASSERT_TRUE(schema.ok()) << schema.status().ToString();
  auto accepts = [&](std::string_view text) {
    JsonMatcher m(*schema);
    return m.FeedAll(text) && m.Complete();
  };
  EXPECT_TRUE(accepts(R"({"city":"Oslo","unit":"celsius"})"));
  EXPECT_TRUE(accepts(R"({"city":"a\"b","unit":"fahrenheit","days":-12,"detailed":true})"));
  EXPECT_FALSE(accepts(R"({"city":"Oslo"})"));                      // required unit missing
  EXPECT_FALSE(accepts(R"({"unit":"celsius","city":"Oslo"})"));     // order is the schema's
  EXPECT_FALSE(accepts(R"({"city":"Oslo","unit":"kelvin"})"));      // not in the enum
  EXPECT_FALSE(accepts(R"({"city":"Oslo","unit":"celsius","days":1.5})"));  // integer
  EXPECT_FALSE(accepts(R"({"city":"Oslo","unit":"celsius","x":1})"));       // unknown
  EXPECT_FALSE(accepts(R"({"city":"0123456789abc","unit":"celsius"})"));    // maxLength
  auto number = JsonSchema::Compile(json::parse(R"({"type":"number"})"));
  ASSERT_TRUE(number.ok());
  JsonMatcher m(*number);
  EXPECT_TRUE(m.FeedAll("-0.5e+1"));
  EXPECT_TRUE(m.Complete());
  EXPECT_FALSE(m.FeedAll("."));
  for (const char* bad : {R"({"type":"object","patternProperties":{}})", R"({"$ref":"#/x"})",
                          R"({"type":"object","properties":{"a":{}},"required":["b"]})",
                          R"({"type":"tuple"})", "[1]"}) {
    EXPECT_EQ(JsonSchema::Compile(json::parse(bad)).status().code(),
              StatusCode::kInvalidArgument)
        << bad;
  }
}

// Random weights, the stories260K vocabulary as token texts (SentencePiece
// pieces, multi-character tokens included), sampled and greedy, batched.
TEST(JsonSchemaConstraint, RandomWeightModelsAlwaysProduceValidOutput) {
  SKIP_WITHOUT_TEST_DEVICE();
  auto vocab_source = Engine::Load(testutil::Stories260KPath(), EngineOptions{});
  ASSERT_TRUE(vocab_source.ok());
  auto tokenizer = Tokenizer::FromGguf((*vocab_source)->gguf());
  ASSERT_TRUE(tokenizer.ok());
  auto table = std::make_shared<TokenTable>();
  for (int32_t id = 0; id < (*tokenizer)->size(); ++id) {
    table->pieces.push_back((*tokenizer)->TokenPiece(id));
  }
  table->eog_ids = {(*vocab_source)->info().eos_id};

  for (GgmlType type : {GgmlType::kF32, GgmlType::kQ8_0}) {
    testing::RandomModelSpec spec;
    spec.n_vocab = (*tokenizer)->size();
    spec.n_embd = 64;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 128;
    spec.n_ctx = 512;
    spec.weight_type = type;
    spec.seed = 11 + static_cast<uint64_t>(type);
    spec.eos_id = table->eog_ids[0];
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("sinew_constraint_" + std::to_string(::getpid()) + ".gguf"))
                                 .string();
    ASSERT_TRUE(testing::WriteRandomModel(spec, path).ok());
    EngineOptions eo = testing::ServingTestEngineOptions(2);
    auto engine = ServingEngine::Load(path, eo, testing::ServingTestOptions());
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    // With step overlap: each step's masks go down after the step before is
    // taken in, and outputs that end (the schema complete) drop a row.
    ServingOptions overlap_opts;
    overlap_opts.overlap_steps_always = true;
    overlap_opts.speculative_draft_tokens = 0;
    auto overlapped = ServingEngine::Load(path, eo, testing::ServingTestOptions(overlap_opts));
    ASSERT_TRUE(overlapped.ok()) << overlapped.status().ToString();
    std::vector<std::string> first_outputs;

    for (ServingEngine* serving : {engine->get(), overlapped->get()}) {
      std::vector<std::thread> threads;
      std::vector<std::string> outputs(std::size(kSchemas) * 6);
      std::vector<std::string> errors(outputs.size());
      for (size_t i = 0; i < outputs.size(); ++i) {
        threads.emplace_back([&, i] {
          const json::value schema = json::parse(kSchemas[i % std::size(kSchemas)]);
          auto constraint = MakeJsonSchemaConstraint(schema, table);
          if (!constraint.ok()) {
            errors[i] = constraint.status().ToString();
            return;
          }
          SamplingParams params;
          params.greedy = i % 6 == 0;
          params.temperature = 1.5f;
          params.seed = i;
          params.max_tokens = 400;
          auto r = serving->Generate({1, 20 + static_cast<int32_t>(i)}, params, nullptr,
                                     std::move(constraint).value());
          if (!r.ok()) {
            errors[i] = r.status().ToString();
            return;
          }
          if (r->finish_reason != FinishReason::kStopToken) errors[i] = "did not finish";
          for (const GeneratedToken& t : r->tokens) outputs[i] += table->pieces[t.id];
        });
      }
      for (auto& t : threads) t.join();
      for (size_t i = 0; i < outputs.size(); ++i) {
        EXPECT_EQ(errors[i], "") << i;
        boost::system::error_code ec;
        json::value v = json::parse(outputs[i], ec);
        ASSERT_FALSE(ec) << "output " << i << " does not parse: " << outputs[i];
        EXPECT_TRUE(Valid(v, json::parse(kSchemas[i % std::size(kSchemas)])))
            << "output " << i << " does not validate: " << outputs[i];
      }
      if (first_outputs.empty()) {
        first_outputs = outputs;
      } else {
        EXPECT_EQ(outputs, first_outputs);  // the same seeds give the same outputs
      }
    }
    const ServingStats stats = (*overlapped)->stats();
    EXPECT_GT(stats.overlapped_steps, 0u);
    EXPECT_GT(stats.overlap_dropped_rows, 0u);
    // Unconstrained, the same model does not produce JSON.
    SamplingParams free_params;
    free_params.max_tokens = 30;
    free_params.seed = 3;
    auto free = (*engine)->Generate({1, 20}, free_params, nullptr);
    ASSERT_TRUE(free.ok());
    std::string text;
    for (const GeneratedToken& t : free->tokens) text += table->pieces[t.id];
    boost::system::error_code ec;
    json::parse(text, ec);
    EXPECT_TRUE(ec) << text;
    std::filesystem::remove(path);
  }
}

// Framed alternatives (a forced tool call in a family's own syntax): a byte-level
// vocabulary driven by random logits always yields one alternative's lead, a valid
// JSON value of its schema, and its trail; the model's choice picks the alternative.
TEST(FramedJsonConstraint, RandomLogitsAlwaysGiveOneWholeAlternative) {
  auto table = std::make_shared<TokenTable>();
  for (int c = 1; c < 128; ++c) table->pieces.push_back(std::string(1, static_cast<char>(c)));
  table->pieces.push_back("");  // end of generation
  table->eog_ids = {static_cast<int32_t>(table->pieces.size() - 1)};
  const std::vector<FramedJson> alternatives = {
      {"get_weather\n```json\n", json::parse(kSchemas[0]), "\n```"},
      {"get_time\n```json\n", json::parse(R"({"type":"object","properties":{"zone":{"type":"string","maxLength":4}},"required":["zone"]})"), "\n```"},
      {"n=", json::parse(R"({"type":"integer"})"), "]"},
  };
  std::set<size_t> chosen;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    auto constraint = MakeFramedJsonConstraint(alternatives, table);
    ASSERT_TRUE(constraint.ok()) << constraint.status().ToString();
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> logit(-4.0f, 4.0f);
    std::string out;
    bool ended = false;
    for (int step = 0; step < 400 && !ended; ++step) {
      std::vector<float> logits(table->pieces.size());
      for (float& l : logits) l = logit(rng);
      (*constraint)->Mask(logits);
      const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
      ASSERT_TRUE(std::isfinite(logits[static_cast<size_t>(best)])) << "nothing allowed after " << out;
      if (best == table->eog_ids[0]) {
        ended = true;
        EXPECT_TRUE((*constraint)->Complete());
        break;
      }
      (*constraint)->Accept(static_cast<int32_t>(best));
      out += table->pieces[static_cast<size_t>(best)];
      if (!(*constraint)->CanContinue()) ended = true;
    }
    ASSERT_TRUE(ended) << out;
    bool matched = false;
    for (size_t i = 0; i < alternatives.size(); ++i) {
      const FramedJson& a = alternatives[i];
      if (!out.starts_with(a.lead) || !out.ends_with(a.trail) ||
          out.size() < a.lead.size() + a.trail.size()) {
        continue;
      }
      boost::system::error_code ec;
      const json::value v = json::parse(
          out.substr(a.lead.size(), out.size() - a.lead.size() - a.trail.size()), ec);
      if (!ec && Valid(v, a.schema)) {
        matched = true;
        chosen.insert(i);
      }
    }
    EXPECT_TRUE(matched) << "seed " << seed << ": " << out;
  }
  EXPECT_EQ(chosen.size(), alternatives.size()) << "every alternative is reachable";
  EXPECT_EQ(MakeFramedJsonConstraint({}, table).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sinew::model
