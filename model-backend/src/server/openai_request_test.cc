#include "openai_request.h"

#include <gtest/gtest.h>

namespace sinew::model {
namespace {

Result<OpenAiRequest> Parse(std::string_view body, bool chat = false) {
  ParseLimits limits;
  limits.model_id = "stories260K";
  return ParseOpenAiRequest(boost::json::parse(body), chat, limits);
}

StatusCode CodeOf(std::string_view body, bool chat = false) {
  return Parse(body, chat).status().code();
}

TEST(OpenAiRequest, MapsSamplingParameters) {
  auto request = Parse(R"({"model":"stories260K","prompt":"Once","max_tokens":64,"temperature":0,
      "top_p":0.9,"top_k":40,"min_p":0.05,"seed":7,"repetition_penalty":1.1,"stop":["x","y"],
      "frequency_penalty":0.5,"presence_penalty":-1.25,"ignore_eos":true,
      "stream":true,"stream_options":{"include_usage":true},"logprobs":2,"user":"ignored"})");
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  const GenerationRequest& generation = request->generation;
  EXPECT_EQ(generation.prompt, "Once");
  EXPECT_EQ(generation.sampling.max_tokens, 64);
  EXPECT_TRUE(generation.max_tokens_given);
  EXPECT_EQ(generation.sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(generation.sampling.top_p, 0.9f);
  EXPECT_EQ(generation.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(generation.sampling.min_p, 0.05f);
  EXPECT_EQ(generation.sampling.seed, 7u);
  EXPECT_FLOAT_EQ(generation.sampling.repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(generation.sampling.frequency_penalty, 0.5f);
  EXPECT_FLOAT_EQ(generation.sampling.presence_penalty, -1.25f);
  EXPECT_FALSE(generation.sampling.stop_at_eos);
  EXPECT_EQ(generation.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(request->stream);
  EXPECT_TRUE(request->include_usage);
  EXPECT_TRUE(generation.want_logprobs);
  EXPECT_EQ(generation.sampling.logprobs, 2);
}

TEST(OpenAiRequest, DefaultsAndChat) {
  auto completion = Parse(R"({"prompt":["one"]})");
  ASSERT_TRUE(completion.ok());
  EXPECT_EQ(completion->generation.sampling.max_tokens, 16);
  EXPECT_FALSE(completion->generation.max_tokens_given);
  auto chat = Parse(R"({"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}],
                        "logprobs":true,"top_logprobs":3})",
                    true);
  ASSERT_TRUE(chat.ok()) << chat.status().ToString();
  ASSERT_EQ(chat->generation.messages.size(), 1u);
  EXPECT_EQ(chat->generation.messages[0].content, "Hi");
  EXPECT_EQ(chat->top_logprobs, 3);
}

TEST(OpenAiRequest, PromptAsTokenIds) {
  auto flat = Parse(R"({"prompt":[1,403,9]})");
  ASSERT_TRUE(flat.ok()) << flat.status().ToString();
  EXPECT_EQ(flat->generation.prompt_tokens, (std::vector<int32_t>{1, 403, 9}));
  auto nested = Parse(R"({"prompt":[[1,2]]})");
  ASSERT_TRUE(nested.ok());
  EXPECT_EQ(nested->generation.prompt_tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(CodeOf(R"({"prompt":[1,-2]})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"prompt":[1,"a"]})"), StatusCode::kUnimplemented);
  EXPECT_EQ(CodeOf(R"({"prompt":["a","b"]})"), StatusCode::kUnimplemented);
}

TEST(OpenAiRequest, RejectsBadInput) {
  EXPECT_EQ(CodeOf("[1,2]"), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"model":"gpt-4","prompt":"x"})"), StatusCode::kNotFound);
  EXPECT_EQ(CodeOf(R"({"max_tokens":5})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"prompt":5})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"prompt":"x","max_tokens":0})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"prompt":"x","max_tokens":"many"})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"prompt":"x","temperature":3})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"prompt":"x","top_p":0})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"prompt":"x","top_k":-1})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"prompt":"x","stop":["a","b","c","d","e"]})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"prompt":"x","stream":"yes"})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"prompt":"x","n":2})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"prompt":"x","frequency_penalty":2.5})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"prompt":"x","presence_penalty":-2.01})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"prompt":"x","presence_penalty":"high"})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"prompt":"x","ignore_eos":1})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"prompt":"x","logprobs":9})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"messages":[]})", true), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"messages":[{"role":"robot","content":"x"}]})", true),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"messages":[{"role":"user"}]})", true), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", true),
            StatusCode::kInvalidArgument);
  auto named = Parse(R"({"prompt":"x","temperature":"hot"})");
  ASSERT_FALSE(named.ok());
  EXPECT_NE(named.status().message().find("temperature"), std::string::npos);
  // A tool whose parameters schema is not an object's (it once answered 200 with no call).
  for (const char* schema : {R"({"type":"string"})", R"({"type":"array","items":{}})", R"({"type":["object","null"]})"}) {
    auto tool = Parse(std::string(R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required",)") +
                          R"("tools":[{"type":"function","function":{"name":"f","parameters":)" + schema + "}}]}",
                      true);
    ASSERT_FALSE(tool.ok()) << schema;
    EXPECT_EQ(tool.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(tool.status().message().find("tools[0].function.parameters must be an object schema"), std::string::npos)
        << tool.status().message();
  }
  // Numbers as people write them (it once said "between 0E0 and 2E0").
  auto range = Parse(R"({"prompt":"x","temperature":3})");
  ASSERT_FALSE(range.ok());
  EXPECT_EQ(range.status().message(), "temperature must be between 0 and 2");
  auto top_p = Parse(R"({"prompt":"x","top_p":1.5})");
  ASSERT_FALSE(top_p.ok());
  EXPECT_EQ(top_p.status().message().find("E0"), std::string::npos) << top_p.status().message();
}

// Field errors name the field's path the way every Sinew reader does (sinew/json_fields.h).
TEST(OpenAiRequest, ErrorsNameTheFieldPath) {
  auto message = [](std::string_view body, bool chat) {
    return Parse(body, chat).status().message();
  };
  EXPECT_EQ(message(R"({"model":5,"prompt":"x"})", false), "model must be a string");
  EXPECT_EQ(message(R"({"max_tokens":5})", false), "prompt is required");
  EXPECT_EQ(message(R"({"prompt":"x","max_tokens":2.5})", false), "max_tokens must be an integer");
  EXPECT_EQ(message(R"({"prompt":"x","max_tokens":1e20})", false),
            "max_tokens must be between 1 and 1048576");
  EXPECT_EQ(message(R"({"prompt":"x","stream_options":{"include_usage":1}})", false),
            "stream_options.include_usage must be a boolean");
  EXPECT_EQ(message(R"({"messages":[{"content":"x"}]})", true), "messages[0].role is required");
  EXPECT_EQ(message(R"({"messages":[{"role":"user","content":"x","name":3}]})", true),
            "messages[0].name must be a string");
  EXPECT_EQ(message(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})",
                    true),
            "tools[0].function must be an object");
  EXPECT_EQ(message(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function",
                        "function":{"name":"f","parameters":[]}}]})",
                    true),
            "tools[0].function.parameters must be an object");
}

// null means "not given"; a seed past INT64_MAX reads as INT64_MAX, as it always has.
TEST(OpenAiRequest, NullIsNotGivenAndSeedsKeepTheirRange) {
  auto nulls =
      Parse(R"({"prompt":"x","max_tokens":null,"temperature":null,"stream":null,"seed":null})");
  ASSERT_TRUE(nulls.ok()) << nulls.status().ToString();
  EXPECT_FALSE(nulls->generation.max_tokens_given);
  auto big = Parse(R"({"prompt":"x","seed":18446744073709551615})");
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(big->generation.sampling.seed, static_cast<uint64_t>(INT64_MAX));
  auto negative = Parse(R"({"prompt":"x","seed":-1})");
  ASSERT_TRUE(negative.ok());
  EXPECT_EQ(negative->generation.sampling.seed, UINT64_MAX);
  EXPECT_EQ(Parse(R"({"prompt":"x","seed":1.5})").status().message(), "seed must be an integer");
}

}  // namespace
}  // namespace sinew::model
