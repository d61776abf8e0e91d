// The Messages API answer built from generated text: content blocks (thinking, text,
// tool_use), stop_reason, and the stream's events in Anthropic's order.
#include "anthropic_response.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace sinew::model {
namespace {

namespace json = boost::json;

struct SseEvent {
  std::string name;
  json::object data;
};

// Splits `event: x\ndata: {...}\n\n` events; checks each data's type equals its name.
std::vector<SseEvent> ParseEvents(const std::string& text) {
  std::vector<SseEvent> events;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an unterminated event: " << text.substr(at);
    if (end == std::string::npos) break;
    std::string_view block(text.data() + at, end - at);
    at = end + 2;
    EXPECT_TRUE(block.starts_with("event: ")) << block;
    size_t newline = block.find('\n');
    SseEvent event;
    event.name = std::string(block.substr(7, newline - 7));
    std::string_view data = block.substr(newline + 1);
    EXPECT_TRUE(data.starts_with("data: ")) << block;
    event.data = json::parse(data.substr(6)).as_object();
    EXPECT_EQ(event.data.at("type").as_string(), event.name);
    events.push_back(std::move(event));
  }
  return events;
}

// What a client rebuilds from a stream, checking Anthropic's event order on the way.
struct Rebuilt {
  json::array content;  // the blocks, tool_use input parsed from the partial_json pieces
  std::string stop_reason;
  json::value stop_sequence;
  int64_t input_tokens = -1, output_tokens = -1;
  std::vector<std::string> partial_json;  // every input_json_delta piece
};
Rebuilt Rebuild(const std::vector<SseEvent>& events) {
  Rebuilt out;
  EXPECT_GE(events.size(), 3u);
  if (events.size() < 3) return out;
  EXPECT_EQ(events.front().name, "message_start");
  out.input_tokens = events.front().data.at("message").at("usage").at("input_tokens").as_int64();
  EXPECT_EQ(events[events.size() - 2].name, "message_delta");
  EXPECT_EQ(events.back().name, "message_stop");
  int64_t open = -1;
  std::vector<std::string> json_text;
  for (size_t i = 1; i + 2 < events.size(); ++i) {
    const SseEvent& e = events[i];
    if (e.name == "content_block_start") {
      EXPECT_EQ(open, -1) << "a block starts before the previous one stopped";
      open = e.data.at("index").as_int64();
      EXPECT_EQ(open, static_cast<int64_t>(out.content.size())) << "blocks are numbered in order";
      out.content.push_back(e.data.at("content_block"));
      json_text.emplace_back();
    } else if (e.name == "content_block_delta") {
      EXPECT_EQ(e.data.at("index").as_int64(), open) << "a delta for a block that is not open";
      json::object& block = out.content.at(open).as_object();
      const json::object& delta = e.data.at("delta").as_object();
      const std::string_view type = delta.at("type").as_string();
      if (type == "text_delta") {
        block["text"] =
            std::string(block.at("text").as_string()) + std::string(delta.at("text").as_string());
      } else if (type == "thinking_delta") {
        block["thinking"] = std::string(block.at("thinking").as_string()) +
                            std::string(delta.at("thinking").as_string());
      } else if (type == "input_json_delta") {
        json_text[open] += delta.at("partial_json").as_string();
        out.partial_json.emplace_back(delta.at("partial_json").as_string());
      } else {
        ADD_FAILURE() << "unknown delta " << type;
      }
    } else if (e.name == "content_block_stop") {
      EXPECT_EQ(e.data.at("index").as_int64(), open);
      json::object& block = out.content.at(open).as_object();
      if (block.at("type") == "tool_use" && !json_text[open].empty())
        block["input"] = json::parse(json_text[open]);
      open = -1;
    } else if (e.name != "ping") {
      ADD_FAILURE() << "unexpected event " << e.name;
    }
  }
  EXPECT_EQ(open, -1) << "a block was never stopped";
  const json::object& delta = events[events.size() - 2].data;
  out.stop_reason = delta.at("delta").at("stop_reason").as_string();
  out.stop_sequence = delta.at("delta").at("stop_sequence");
  out.output_tokens = delta.at("usage").at("output_tokens").as_int64();
  return out;
}

AnthropicRequest Request() {
  AnthropicRequest request;
  request.generation.chat = true;
  return request;
}

GenerationOutcome Outcome(std::string finish_reason, std::string stop_sequence = "") {
  GenerationOutcome outcome;
  outcome.finish_reason = std::move(finish_reason);
  outcome.stop_sequence = std::move(stop_sequence);
  outcome.prompt_tokens = 12;
  outcome.completion_tokens = 7;
  return outcome;
}

// Runs `pieces` through a fresh responder both ways: the body, and the rebuilt stream.
struct Both {
  json::object body;
  Rebuilt stream;
};
Both Respond(const std::vector<std::string>& pieces, const GenerationOutcome& outcome, bool tools,
             bool opened_by_prompt = false) {
  const AnthropicRequest request = Request();
  const ChatTemplate chat_template(ChatTemplateKind::kChatMl);
  AnthropicResponder whole(request, "m", "msg_1_2", 12);
  AnthropicResponder streamed(request, "m", "msg_1_2", 12);
  for (AnthropicResponder* r : {&whole, &streamed}) {
    r->SetReasoningOpenedByPrompt(opened_by_prompt);
    if (tools) r->EnableTools(chat_template, false);
  }
  std::string events = streamed.StreamStart();
  for (const std::string& piece : pieces) {
    whole.Accumulate(TextChunk{piece, {}});
    events += streamed.StreamChunk(TextChunk{piece, {}});
  }
  events += streamed.StreamEnd(outcome);
  return {json::parse(whole.Body(outcome)).as_object(), Rebuild(ParseEvents(events))};
}

TEST(AnthropicResponse, PlainTextIsOneTextBlockEndingTheTurn) {
  Both r = Respond({"Once", " upon", " a time"}, Outcome("stop"), false);
  EXPECT_EQ(r.body.at("id").as_string(), "msg_1_2");
  EXPECT_EQ(r.body.at("type").as_string(), "message");
  EXPECT_EQ(r.body.at("role").as_string(), "assistant");
  EXPECT_EQ(r.body.at("model").as_string(), "m");
  EXPECT_EQ(r.body.at("content"), json::parse(R"([{"type":"text","text":"Once upon a time"}])"));
  EXPECT_EQ(r.body.at("stop_reason").as_string(), "end_turn");
  EXPECT_TRUE(r.body.at("stop_sequence").is_null());
  EXPECT_EQ(r.body.at("usage"), json::parse(R"({"input_tokens":12,"output_tokens":7})"));
  EXPECT_EQ(r.stream.content, r.body.at("content"));
  EXPECT_EQ(r.stream.stop_reason, "end_turn");
  EXPECT_EQ(r.stream.input_tokens, 12);
  EXPECT_EQ(r.stream.output_tokens, 7);
}

TEST(AnthropicResponse, StopReasonSaysWhatEndedTheAnswer) {
  Both length = Respond({"a"}, Outcome("length"), false);
  EXPECT_EQ(length.body.at("stop_reason").as_string(), "max_tokens");
  EXPECT_EQ(length.stream.stop_reason, "max_tokens");
  Both stop = Respond({"a"}, Outcome("stop", "END"), false);
  EXPECT_EQ(stop.body.at("stop_reason").as_string(), "stop_sequence");
  EXPECT_EQ(stop.body.at("stop_sequence").as_string(), "END");
  EXPECT_EQ(stop.stream.stop_reason, "stop_sequence");
  EXPECT_EQ(stop.stream.stop_sequence, json::value("END"));
  Both empty = Respond({}, Outcome("stop"), false);
  EXPECT_TRUE(empty.body.at("content").as_array().empty());
  EXPECT_TRUE(empty.stream.content.empty());
}

TEST(AnthropicResponse, ReasoningBecomesAThinkingBlockBeforeTheText) {
  Both r = Respond({"<th", "ink>Plan", " it.</think>\n\n", "Done."}, Outcome("stop"), false);
  const json::value expected = json::parse(
      R"([{"type":"thinking","thinking":"Plan it.","signature":""},{"type":"text","text":"Done."}])");
  EXPECT_EQ(r.body.at("content"), expected);
  EXPECT_EQ(r.stream.content, expected);
  // A prompt that ended in <think> (DeepSeek R1) starts the output inside the reasoning.
  Both opened = Respond({"Hmm.</think>", "Yes."}, Outcome("stop"), false, true);
  EXPECT_EQ(opened.body.at("content").at(0).at("thinking").as_string(), "Hmm.");
  EXPECT_EQ(opened.stream.content.at(0).at("thinking").as_string(), "Hmm.");
  EXPECT_EQ(opened.stream.content.at(1).at("text").as_string(), "Yes.");
  // The streamed thinking is trimmed as the whole one is, spaces inside kept.
  Both spaced = Respond({" \n", "Step one.", "\n", " ", "Step two.\n", "\n</think>", "Ok."},
                        Outcome("stop"), false, true);
  EXPECT_EQ(spaced.body.at("content").at(0).at("thinking").as_string(), "Step one.\n Step two.");
  EXPECT_EQ(spaced.stream.content, spaced.body.at("content"));
}

TEST(AnthropicResponse, ToolCallsBecomeToolUseBlocksWithParsedInput) {
  Both r =
      Respond({"Let me check.", "<tool_call>\n{\"name\": \"get_",
               "weather\", \"arguments\": {\"city\": ", "\"Oslo\", \"days\": 2}}\n</tool_call>"},
              Outcome("stop"), true);
  const json::array& content = r.body.at("content").as_array();
  ASSERT_EQ(content.size(), 2u) << r.body;
  EXPECT_EQ(content[0], json::parse(R"({"type":"text","text":"Let me check."})"));
  EXPECT_EQ(content[1].at("type").as_string(), "tool_use");
  EXPECT_EQ(content[1].at("id").as_string(), "toolu_1_2_0");
  EXPECT_EQ(content[1].at("name").as_string(), "get_weather");
  EXPECT_EQ(content[1].at("input"), json::parse(R"({"city":"Oslo","days":2})"));
  EXPECT_EQ(r.body.at("stop_reason").as_string(), "tool_use");
  EXPECT_EQ(r.stream.content, r.body.at("content"));
  EXPECT_EQ(r.stream.stop_reason, "tool_use");
  EXPECT_GT(r.stream.partial_json.size(), 1u) << "the input arrives as it is generated";
  // Two calls: two blocks, numbered in order.
  Both two = Respond({"<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>",
                      "<tool_call>{\"name\":\"g\",\"arguments\":{\"a\":[1]}}</tool_call>"},
                     Outcome("stop"), true);
  ASSERT_EQ(two.body.at("content").as_array().size(), 2u) << two.body;
  EXPECT_EQ(two.body.at("content").at(1).at("id").as_string(), "toolu_1_2_1");
  EXPECT_EQ(two.stream.content, two.body.at("content"));
}

TEST(AnthropicResponse, ErrorsHaveAnthropicsShapeAndStatus) {
  EXPECT_EQ(json::parse(AnthropicErrorBody("invalid_request_error", "max_tokens is required")),
            json::parse(R"({"type":"error","error":{"type":"invalid_request_error",
                            "message":"max_tokens is required"}})"));
  EXPECT_EQ(AnthropicErrorEvent("overloaded_error", "busy"),
            "event: error\ndata: " + AnthropicErrorBody("overloaded_error", "busy") + "\n\n");
  auto mapped = [](const Status& s) {
    AnthropicError e = AnthropicErrorFor(s);
    return std::to_string(e.http_status) + " " + e.type;
  };
  EXPECT_EQ(mapped(Status::InvalidArgument("x")), "400 invalid_request_error");
  EXPECT_EQ(mapped(Status::OutOfRange("x")), "400 invalid_request_error");
  EXPECT_EQ(mapped(Status::Unimplemented("x")), "400 invalid_request_error");
  EXPECT_EQ(mapped(Status::NotFound("x")), "404 not_found_error");
  EXPECT_EQ(mapped(Status::ResourceExhausted("x")), "529 overloaded_error");
  EXPECT_EQ(mapped(Status::Internal("x")), "500 api_error");
}

}  // namespace
}  // namespace sinew::model
