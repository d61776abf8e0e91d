// The store's bytes-level read path (session-store/src/event_util.cc): ReadEnvelopeSeq,
// which ReadEventBytes uses to check a stored event's position without decoding it, and
// DecodeEvent, which readers of ReadEventBytes (the harness's log loader) call on each
// element. Input: one stored value, as damaged or hostile as the fuzzer likes.
// Invariants: whatever protobuf decodes as an Event, the envelope walk accepts and reads
// the same seq from; DecodeEvent agrees with protobuf and names the seq it was given when
// it refuses.
#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <string>

#include "event_util.h"
#include "fuzz_util.h"
#include "sinew/session_store/session_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // protobuf logs every string field that is not UTF-8; refusing it is what is tested.
  static const google::protobuf::LogSilencer quiet;
  const std::string_view bytes = sinew::fuzz::Bytes(data, size);
  uint64_t envelope_seq = 0;
  const bool envelope_ok = sinew::store::ReadEnvelopeSeq(bytes, &envelope_seq);
  sinew::v1::Event parsed;
  const bool decodable = parsed.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  if (decodable) {
    if (!envelope_ok) sinew::fuzz::Violated("the envelope walk refused a decodable event");
    if (envelope_seq != parsed.seq()) sinew::fuzz::Violated("the envelope walk read another seq");
  }
  const uint64_t asked = decodable ? parsed.seq() : envelope_seq;
  sinew::v1::Event out;
  const sinew::Status st = sinew::store::DecodeEvent(bytes, asked, &out);
  if (st.ok() != decodable) sinew::fuzz::Violated("DecodeEvent disagrees with protobuf");
  if (!st.ok()) {
    if (st.code() != sinew::StatusCode::kCorruption) sinew::fuzz::Violated("not kCorruption");
    if (st.message().find("event " + std::to_string(asked)) != 0)
      sinew::fuzz::Violated("the error does not name the seq");
  }
  // One more than the seq it carries: refused, naming the seq it was asked for.
  if (decodable && parsed.seq() != UINT64_MAX) {
    sinew::v1::Event other;
    if (sinew::store::DecodeEvent(bytes, parsed.seq() + 1, &other).ok())
      sinew::fuzz::Violated("DecodeEvent accepted an event at another seq");
  }
  return 0;
}
