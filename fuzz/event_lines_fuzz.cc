// Event decoding and export/import lines. Each input line is decoded as the CLI reads
// `sinew import` files and exported events (client::ParseEvent: proto3 JSON), exported again
// as the harness writes them (ProtoJsonLine, GET /events and export) and read back: a
// decoded event must survive export -> import unchanged. The decoded events then go
// through the store's append validation (ValidateEventForAppend), the binary encoding
// the store keeps, and the harness's context builder (BuildContext, which turns a
// session's log into the model's conversation on every wake).
#include <cstdint>
#include <string>
#include <vector>

#include <google/protobuf/util/message_differencer.h>

#include "sinew/client/api_client.h"
#include "context_builder.h"
#include "event_util.h"
#include "fuzz_util.h"
#include "sinew/proto_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint64_t budget = 16u << (data[0] % 12);
  std::string_view rest = sinew::fuzz::Bytes(data + 1, size - 1);
  std::vector<sinew::v1::Event> events;
  while (!rest.empty() && events.size() < 64) {
    auto [line, after] = sinew::fuzz::SplitAt(rest, "\n");
    rest = after;
    auto ev = sinew::client::ParseEvent(line);
    if (!ev.ok()) continue;
    const std::string exported = sinew::ProtoJsonLine(*ev);
    auto again = sinew::client::ParseEvent(exported);
    if (!again.ok()) sinew::fuzz::Violated("an exported event does not import");
    // (Compared as messages: a map's JSON key order is not stable between instances.)
    if (!google::protobuf::util::MessageDifferencer::Equals(*ev, *again)) {
      sinew::fuzz::Violated("export -> import changed the event");
    }
    sinew::v1::Event binary;
    if (!binary.ParseFromString(ev->SerializeAsString())) sinew::fuzz::Violated("binary round trip failed");
    (void)sinew::store::ValidateEventForAppend(*ev, events.size(), 1 << 20);
    events.push_back(std::move(ev).value());
  }
  auto view = sinew::harness::BuildContext(events, budget);
  (void)view;
  return 0;
}
