// The Messages API request: what each field and block becomes in the GenerationRequest
// the chat path runs, and the error every malformed request gets.
#include "anthropic_request.h"

#include <gtest/gtest.h>

namespace sinew::model {
namespace {

Result<AnthropicRequest> Parse(std::string_view body, bool count_only = false) {
  AnthropicParseLimits limits;
  limits.model_id = "stories260K";
  limits.count_only = count_only;
  return ParseAnthropicRequest(boost::json::parse(body), limits);
}

// A request with these extra top-level fields and these messages.
std::string Body(std::string_view messages, std::string_view extra = "") {
  return std::string(R"({"model":"stories260K","max_tokens":16,"messages":)") +
         std::string(messages) + std::string(extra) + "}";
}

TEST(AnthropicRequest, SystemBlocksAndToolTurnsBecomeTheChatMessagesOfTheChatPath) {
  auto request = Parse(Body(
      R"([
      {"role":"user","content":[{"type":"text","text":"Weather in "},{"type":"text","text":"Oslo?"}]},
      {"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},
                                     {"type":"text","text":"Checking."},
                                     {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Oslo"}},
                                     {"type":"tool_use","id":"toolu_2","name":"get_time","input":{}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"5 C"},
                                {"type":"tool_result","tool_use_id":"toolu_2","is_error":true,
                                 "content":[{"type":"text","text":"no clock"}]},
                                {"type":"text","text":"And tomorrow?"}]}])",
      R"(,"system":[{"type":"text","text":"Be brief. "},{"type":"text","text":"Use tools."}])"));
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  const std::vector<ChatMessage>& m = request->generation.messages;
  ASSERT_EQ(m.size(), 6u);
  EXPECT_TRUE(request->generation.chat);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[0].content, "Be brief. Use tools.");
  EXPECT_EQ(m[1].role, "user");
  EXPECT_EQ(m[1].content, "Weather in Oslo?");
  EXPECT_EQ(m[2].role, "assistant");
  EXPECT_EQ(m[2].content, "Checking.") << "thinking blocks are not shown to the template";
  ASSERT_EQ(m[2].tool_calls.size(), 2u);
  EXPECT_EQ(m[2].tool_calls[0].id, "toolu_1");
  EXPECT_EQ(m[2].tool_calls[0].name, "get_weather");
  EXPECT_EQ(m[2].tool_calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(m[2].tool_calls[1].arguments, "{}");
  EXPECT_EQ(m[3].role, "tool");
  EXPECT_EQ(m[3].tool_call_id, "toolu_1");
  EXPECT_EQ(m[3].content, "5 C");
  EXPECT_EQ(m[4].role, "tool");
  EXPECT_EQ(m[4].content, "Error: no clock");
  EXPECT_EQ(m[5].role, "user");
  EXPECT_EQ(m[5].content, "And tomorrow?");
}

TEST(AnthropicRequest, AnAssistantTurnOfOnlyToolUseHasNullContentAndAResultOnlyTurnNoUserMessage) {
  auto request = Parse(Body(R"([{"role":"user","content":"go"},
      {"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{"x":1}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}])"));
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  const std::vector<ChatMessage>& m = request->generation.messages;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_TRUE(m[1].content_null);
  EXPECT_EQ(m[2].role, "tool");
  EXPECT_EQ(m[2].content, "");
}

TEST(AnthropicRequest, MapsToolsToolChoiceSamplingAndStopSequences) {
  const std::string tools = R"(,"tools":[{"name":"get_weather","description":"Weather",
      "input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},
      {"name":"get_time","input_schema":{"type":"object"}}])";
  auto request = Parse(Body(R"([{"role":"user","content":"hi"}])",
                            tools + R"(,"tool_choice":{"type":"tool","name":"get_time"},
      "temperature":0.5,"top_p":0.9,"top_k":40,"stop_sequences":["END","\n\n"],"stream":true,
      "metadata":{"user_id":"u1"},"thinking":{"type":"enabled","budget_tokens":1024})"));
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  const GenerationRequest& g = request->generation;
  ASSERT_EQ(g.tools.size(), 2u);
  EXPECT_EQ(g.tools[0].name, "get_weather");
  EXPECT_EQ(g.tools[0].description, "Weather");
  EXPECT_TRUE(g.tools[0].parameters.at("properties").as_object().contains("city"));
  EXPECT_EQ(g.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(g.tool_choice_name, "get_time");
  EXPECT_EQ(g.sampling.max_tokens, 16);
  EXPECT_FALSE(g.max_tokens_given) << "max_tokens is a cap: cut to the room in the context";
  EXPECT_FLOAT_EQ(g.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(g.sampling.top_p, 0.9f);
  EXPECT_EQ(g.sampling.top_k, 40);
  EXPECT_EQ(g.stop, (std::vector<std::string>{"END", "\n\n"}));
  EXPECT_TRUE(request->stream);

  auto choice = [&](std::string_view tool_choice) {
    auto r = Parse(Body(R"([{"role":"user","content":"hi"}])",
                        tools + R"(,"tool_choice":)" + std::string(tool_choice)));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->generation.tool_choice : ToolChoice::kAuto;
  };
  EXPECT_EQ(choice(R"({"type":"auto"})"), ToolChoice::kAuto);
  EXPECT_EQ(choice(R"({"type":"any","disable_parallel_tool_use":true})"), ToolChoice::kRequired);
  EXPECT_EQ(choice(R"({"type":"none"})"), ToolChoice::kNone);
}

TEST(AnthropicRequest, CountTokensNeedsNoMaxTokens) {
  auto counted =
      Parse(R"({"model":"stories260K","messages":[{"role":"user","content":"hi"}]})", true);
  ASSERT_TRUE(counted.ok()) << counted.status().ToString();
  EXPECT_EQ(counted->generation.messages.size(), 1u);
  EXPECT_EQ(Parse(R"({"model":"stories260K","messages":[{"role":"user","content":"hi"}]})")
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

// Every malformed request is refused with the code the handler turns into its 4xx, and a
// message that names the field.
TEST(AnthropicRequest, RefusesEachMalformedRequestNamingTheField) {
  const std::string user = R"({"role":"user","content":"hi"})";
  const std::string tool = R"(,"tools":[{"name":"f","input_schema":{"type":"object"}}])";
  const std::string call =
      R"({"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]})";
  struct Case {
    std::string body;
    StatusCode code;
    std::string mentions;
  };
  const std::vector<Case> cases = {
      {"[]", StatusCode::kInvalidArgument, "JSON object"},
      {R"({"max_tokens":5,"messages":[)" + user + "]}", StatusCode::kInvalidArgument, "model"},
      {R"({"model":"gpt-x","max_tokens":5,"messages":[)" + user + "]}", StatusCode::kNotFound,
       "gpt-x"},
      {R"({"model":"stories260K","messages":[)" + user + "]}", StatusCode::kInvalidArgument,
       "max_tokens"},
      {Body("[" + user + "]", R"(,"max_tokens":0)"), StatusCode::kInvalidArgument, "max_tokens"},
      {Body("[" + user + "]", R"(,"max_tokens":"many")"), StatusCode::kInvalidArgument,
       "max_tokens"},
      {R"({"model":"stories260K","max_tokens":5})", StatusCode::kInvalidArgument, "messages"},
      {Body("[]"), StatusCode::kInvalidArgument, "messages"},
      {Body(R"([{"role":"system","content":"x"}])"), StatusCode::kInvalidArgument,
       "messages[0].role"},
      {Body(R"([{"role":"tool","content":"x"}])"), StatusCode::kInvalidArgument,
       "messages[0].role"},
      {Body(R"([{"content":"x"}])"), StatusCode::kInvalidArgument, "messages[0].role"},
      {Body(R"([{"role":"user"}])"), StatusCode::kInvalidArgument, "messages[0].content"},
      {Body(R"([{"role":"user","content":7}])"), StatusCode::kInvalidArgument,
       "messages[0].content"},
      {Body(R"([{"role":"user","content":[{"text":"x"}]}])"), StatusCode::kInvalidArgument,
       "messages[0].content[0].type"},
      {Body(R"([{"role":"user","content":["x"]}])"), StatusCode::kInvalidArgument,
       "messages[0].content[0]"},
      {Body(R"([{"role":"user","content":[{"type":"txt","text":"x"}]}])"),
       StatusCode::kInvalidArgument, "txt"},
      {Body(R"([{"role":"user","content":[{"type":"text"}]}])"), StatusCode::kInvalidArgument,
       "messages[0].content[0].text"},
      {Body(R"([{"role":"user","content":[{"type":"text","text":5}]}])"),
       StatusCode::kInvalidArgument, "messages[0].content[0].text"},
      {Body(R"([{"role":"user","content":[{"type":"image","source":{}}]}])"),
       StatusCode::kUnimplemented, "image"},
      {Body(R"([{"role":"user","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}])"),
       StatusCode::kInvalidArgument, "assistant"},
      {Body("[" + user +
            R"(,{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f"}]},)" + user +
            "]"),
       StatusCode::kInvalidArgument, "input"},
      {Body(
           "[" + user +
           R"(,{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":[1]}]},)" +
           user + "]"),
       StatusCode::kInvalidArgument, "input must be an object"},
      {Body(
           "[" + user +
           R"(,{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"bad name","input":{}}]},)" +
           user + "]"),
       StatusCode::kInvalidArgument, "name"},
      {Body("[" + user +
            R"(,{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"t"}]},)" +
            user + "]"),
       StatusCode::kInvalidArgument, "user messages"},
      {Body(
           R"([{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}]}])"),
       StatusCode::kInvalidArgument, "tool_use_id \"t1\""},
      {Body("[" + user + "," + call +
            R"(,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2"}]}])"),
       StatusCode::kInvalidArgument, "tool_use_id \"t2\""},
      // A result must answer the message right before it, not an older one.
      {Body("[" + user + "," + call +
            R"(,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"}]},
            {"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"}]}])"),
       StatusCode::kInvalidArgument, "messages[4].content[0].tool_use_id"},
      {Body(
           "[" + user + "," + call +
           R"(,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":7}]}])"),
       StatusCode::kInvalidArgument, "content"},
      {Body(
           "[" + user + "," + call +
           R"(,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","is_error":"yes"}]}])"),
       StatusCode::kInvalidArgument, "is_error"},
      {Body("[" + user + ",{\"role\":\"assistant\",\"content\":\"Once\"}]"),
       StatusCode::kUnimplemented, "prefill"},
      {Body("[" + user + "]", R"(,"system":5)"), StatusCode::kInvalidArgument, "system"},
      {Body("[" + user + "]", R"(,"tools":[{"name":"f"}])"), StatusCode::kInvalidArgument,
       "input_schema"},
      {Body("[" + user + "]", R"(,"tools":[{"name":"f","input_schema":{"type":"string"}}])"),
       StatusCode::kInvalidArgument, "input_schema.type"},
      {Body("[" + user + "]", R"(,"tools":[{"type":"web_search_20250305","name":"web_search"}])"),
       StatusCode::kUnimplemented, "server tools"},
      {Body(
           "[" + user + "]",
           R"(,"tools":[{"name":"f","input_schema":{"type":"object"}},{"name":"f","input_schema":{"type":"object"}}])"),
       StatusCode::kInvalidArgument, "repeats"},
      {Body("[" + user + "]", tool + R"(,"tool_choice":{"type":"tool","name":"g"})"),
       StatusCode::kInvalidArgument, "tool_choice.name"},
      {Body("[" + user + "]", tool + R"(,"tool_choice":{"type":"tool"})"),
       StatusCode::kInvalidArgument, "tool_choice.name"},
      {Body("[" + user + "]", tool + R"(,"tool_choice":{"type":"required"})"),
       StatusCode::kInvalidArgument, "tool_choice.type"},
      {Body("[" + user + "]", tool + R"(,"tool_choice":"auto")"), StatusCode::kInvalidArgument,
       "tool_choice"},
      {Body("[" + user + "]", R"(,"tool_choice":{"type":"any"})"), StatusCode::kInvalidArgument,
       "needs tools"},
      {Body("[" + user + "]", R"(,"temperature":1.5)"), StatusCode::kInvalidArgument,
       "temperature"},
      {Body("[" + user + "]", R"(,"top_p":0)"), StatusCode::kInvalidArgument, "top_p"},
      {Body("[" + user + "]", R"(,"top_k":-1)"), StatusCode::kInvalidArgument, "top_k"},
      {Body("[" + user + "]", R"(,"stop_sequences":"END")"), StatusCode::kInvalidArgument,
       "stop_sequences"},
      {Body("[" + user + "]", R"(,"stop_sequences":[""])"), StatusCode::kInvalidArgument,
       "stop_sequences"},
      {Body("[" + user + "]", R"(,"stream":"yes")"), StatusCode::kInvalidArgument, "stream"},
      {Body("[" + user + "]", R"(,"metadata":"u")"), StatusCode::kInvalidArgument, "metadata"},
      {Body("[" + user + "]", R"(,"metadata":{"user_id":3})"), StatusCode::kInvalidArgument,
       "metadata.user_id"},
      {Body("[" + user + "]", R"(,"thinking":{"type":"maybe"})"), StatusCode::kInvalidArgument,
       "thinking.type"},
  };
  for (const Case& c : cases) {
    auto result = Parse(c.body);
    ASSERT_FALSE(result.ok()) << c.body;
    EXPECT_EQ(result.status().code(), c.code) << c.body << " -> " << result.status().ToString();
    EXPECT_NE(result.status().message().find(c.mentions), std::string::npos)
        << c.body << " -> " << result.status().message();
  }
}

}  // namespace
}  // namespace sinew::model
