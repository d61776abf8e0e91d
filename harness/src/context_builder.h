// Context building: the log is complete and immutable; the prompt is a view of it.
//
// While the whole conversation fits the model's context, the view is every message.
// When it does not, the view is: the task (the first user message), one summary
// message, and the latest turns. The summary is written to the log as an annotation
// event (labels kind=summary, through_seq=N) so that every harness builds the same view
// after a wake, and it is moved forward only when the tail outgrows the budget again
// (leaving half the budget free), so the prompt's prefix stays the same from turn to
// turn and the model backend's prefix cache keeps hitting.
//
// Token counts are estimated as bytes/4 (no tokenizer of the remote model is at hand).
#pragma once

#include <optional>
#include <vector>

#include "sinew/harness/model_client.h"
#include "sinew/proto/events.pb.h"

namespace sinew::harness {

struct ContextView {
  std::vector<ChatMessage> messages;
  // A new summary annotation to append before the call, when the window moved.
  std::optional<v1::Event> new_summary;
  uint64_t estimated_tokens = 0;
};

// `budget_tokens`: the model's context minus the reserved output and tool definitions.
ContextView BuildContext(const std::vector<v1::Event>& events, uint64_t budget_tokens);

uint64_t EstimateTokens(const ChatMessage& message);

}  // namespace sinew::harness
