// Context building: the prompt is a view of the log; windowed with a summary when the
// log outgrows the budget, with a prefix that stays stable from turn to turn.
#include <gtest/gtest.h>

#include "context_builder.h"

namespace sinew::harness {
namespace {

class ContextTest : public ::testing::Test {
 protected:
  void Add(v1::Event ev) {
    ev.set_seq(log_.size() + 1);
    log_.push_back(std::move(ev));
  }
  void AddTurn(int n, size_t output_bytes) {
    v1::Event resp;
    resp.mutable_model_response()->set_text("step " + std::to_string(n));
    auto* tc = resp.mutable_model_response()->add_tool_calls();
    tc->set_call_id("c" + std::to_string(n));
    tc->set_name("bash");
    tc->set_input_json(R"({"command":"ls"})");
    Add(resp);
    v1::Event res;
    res.mutable_tool_result()->set_call_id("c" + std::to_string(n));
    res.mutable_tool_result()->set_output(std::string(output_bytes, 'x'));
    Add(res);
  }
  void SetUp() override {
    v1::Event created;
    created.mutable_session_created();
    Add(created);
    v1::Event task;
    task.mutable_user_message()->set_text("the task");
    Add(task);
  }
  std::vector<v1::Event> log_;
};

TEST_F(ContextTest, SmallLogIsTheWholeConversation) {
  AddTurn(1, 10);
  ContextView v = BuildContext(log_, 10000);
  ASSERT_EQ(v.messages.size(), 3u);
  EXPECT_EQ(v.messages[0].text, "the task");
  EXPECT_EQ(v.messages[1].role, ChatMessage::Role::kAssistant);
  EXPECT_EQ(v.messages[1].tool_calls.at(0).id, "c1");
  EXPECT_EQ(v.messages[2].role, ChatMessage::Role::kTool);
  EXPECT_FALSE(v.new_summary.has_value());
}

TEST_F(ContextTest, AnAnswersReasoningTravelsWithItsMessage) {
  AddTurn(1, 10);
  log_[2].mutable_model_response()->set_reasoning("ls shows the files");
  ContextView v = BuildContext(log_, 10000);
  ASSERT_EQ(v.messages.size(), 3u);
  EXPECT_EQ(v.messages[1].text, "step 1");  // the answer alone
  EXPECT_EQ(v.messages[1].reasoning, "ls shows the files");
}

// An interrupt (docs/harness.md, "Interrupts"): the partial answer is shown as the
// assistant's, one cut before anything streamed is left out, and the interrupt event
// itself is not a message (its answer, a user message, is).
TEST_F(ContextTest, AnInterruptedAnswerShowsWhatStreamedAndAnEmptyOneIsLeftOut) {
  v1::Event partial;
  partial.mutable_model_response()->set_text("I will");
  partial.mutable_model_response()->set_partial(true);
  Add(partial);
  v1::Event interrupt;
  interrupt.mutable_interrupt()->set_message("stop");
  Add(interrupt);
  v1::Event answer;
  answer.mutable_user_message()->set_text("stop");
  answer.mutable_user_message()->set_interrupt_seq(4);
  Add(answer);
  v1::Event empty;
  empty.mutable_model_response()->set_partial(true);
  Add(empty);
  v1::Event again;
  again.mutable_user_message()->set_text("really stop");
  Add(again);
  ContextView v = BuildContext(log_, 10000);
  ASSERT_EQ(v.messages.size(), 4u);
  EXPECT_EQ(v.messages[1].role, ChatMessage::Role::kAssistant);
  EXPECT_EQ(v.messages[1].text, "I will");
  EXPECT_EQ(v.messages[2].text, "stop");
  EXPECT_EQ(v.messages[3].text, "really stop");
}

// An imported log may hold any annotation: a "summary" without a usable through_seq is
// an ordinary annotation (event_lines_fuzz found that it aborted the harness on wake).
TEST_F(ContextTest, SummaryAnnotationsWithoutAThroughSeqAreIgnored) {
  AddTurn(1, 10);
  for (const char* through : std::initializer_list<const char*>{"", "12x", "-1", "99999999999999999999999", nullptr}) {
    v1::Event note;
    (*note.mutable_annotation()->mutable_labels())["kind"] = "summary";
    if (through != nullptr) (*note.mutable_annotation()->mutable_labels())["through_seq"] = through;
    note.mutable_annotation()->set_text("not a summary");
    Add(note);
  }
  ContextView v = BuildContext(log_, 10000);
  ASSERT_EQ(v.messages.size(), 3u);  // the task and turn 1: nothing was cut
  EXPECT_EQ(v.messages[0].text, "the task");
  EXPECT_EQ(v.messages[1].text, "step 1");
}

TEST_F(ContextTest, InterruptedResultsTellTheModel) {
  AddTurn(1, 0);
  log_.back().mutable_tool_result()->set_interrupted(true);
  ContextView v = BuildContext(log_, 10000);
  EXPECT_NE(v.messages.back().text.find("may or may not have taken effect"), std::string::npos);
  EXPECT_TRUE(v.messages.back().is_error);
}

TEST_F(ContextTest, OverBudgetKeepsTaskSummaryAndLatestTurnsWithAStablePrefix) {
  const uint64_t budget = 1000;  // tokens, ~4000 bytes
  for (int i = 1; i <= 10; ++i) AddTurn(i, 400);
  ContextView v = BuildContext(log_, budget);
  ASSERT_TRUE(v.new_summary.has_value());
  EXPECT_LE(v.estimated_tokens, budget);
  EXPECT_EQ(v.messages[0].text, "the task");
  EXPECT_NE(v.messages[1].text.find("Summary of the earlier part"), std::string::npos);
  // The tail starts at an assistant turn: no tool result without its call; the summary
  // covers the turn just before it.
  EXPECT_EQ(v.messages[2].role, ChatMessage::Role::kAssistant);
  const int first_kept = std::stoi(v.messages[2].text.substr(5));
  EXPECT_GT(first_kept, 1);
  EXPECT_NE(v.messages[1].text.find("assistant: step " + std::to_string(first_kept - 1) + " [called bash"),
            std::string::npos);
  EXPECT_EQ(v.messages[1].text.find("assistant: step " + std::to_string(first_kept) + " "), std::string::npos);
  EXPECT_EQ(v.messages.back().tool_call_id, "c10");
  // The summary goes into the log; the next turns reuse it: same prefix, no new summary.
  Add(*v.new_summary);
  const std::string prefix = v.messages[1].text;
  for (int i = 11; i <= 12; ++i) {
    AddTurn(i, 100);
    ContextView next = BuildContext(log_, budget);
    EXPECT_FALSE(next.new_summary.has_value()) << "turn " << i;
    ASSERT_GE(next.messages.size(), 2u);
    EXPECT_EQ(next.messages[0].text, "the task");
    EXPECT_EQ(next.messages[1].text, prefix);
    EXPECT_EQ(next.messages.back().tool_call_id, "c" + std::to_string(i));
  }
  // Much later the window moves again, and the new summary extends the old one.
  for (int i = 13; i <= 30; ++i) AddTurn(i, 400);
  ContextView later = BuildContext(log_, budget);
  ASSERT_TRUE(later.new_summary.has_value());
  EXPECT_LE(later.estimated_tokens, budget);
  EXPECT_EQ(later.messages.back().tool_call_id, "c30");
}

}  // namespace
}  // namespace sinew::harness
