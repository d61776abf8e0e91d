// ReadEventBytes against the embedded store and a real sinew-store process: the same
// events as GetEvents, byte for byte, with the same errors; pages bounded by max_bytes;
// damaged stored values reported, never served as events.
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>

#include "event_util.h"
#include "raw_db.h"
#include "sinew/session_store/session_store.h"
#include "sinew/session_store/store_service.h"
#include "sinew/testing/subprocess.h"
#include "store_test_util.h"

namespace sinew::store {
namespace {

using test::AllEvents;
using test::AppendOf;

v1::ReadEventBytesRequest BytesOf(const std::string& id, uint64_t from, uint64_t to, uint32_t limit,
                                  uint64_t max_bytes = 0) {
  v1::ReadEventBytesRequest req;
  req.set_session_id(id);
  req.set_from_seq(from);
  req.set_to_seq(to);
  req.set_limit(limit);
  req.set_max_bytes(max_bytes);
  return req;
}

v1::GetEventsRequest EventsOf(const std::string& id, uint64_t from, uint64_t to, uint32_t limit) {
  v1::GetEventsRequest req;
  req.set_session_id(id);
  req.set_from_seq(from);
  req.set_to_seq(to);
  req.set_limit(limit);
  return req;
}

// Decodes every element of a page, asserting each decodes and has its position's seq.
std::vector<v1::Event> Decoded(const v1::ReadEventBytesResponse& page) {
  std::vector<v1::Event> out(static_cast<size_t>(page.events_size()));
  for (int i = 0; i < page.events_size(); ++i) {
    Status s = DecodeEvent(page.events(i), page.first_seq() + static_cast<uint64_t>(i),
                           &out[static_cast<size_t>(i)]);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  return out;
}

void ExpectSameEvents(const std::vector<v1::Event>& got,
                      const google::protobuf::RepeatedPtrField<v1::Event>& want) {
  ASSERT_EQ(got.size(), static_cast<size_t>(want.size()));
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].SerializeAsString(), want[static_cast<int>(i)].SerializeAsString())
        << "event " << i;
  }
}

// A session of 31 events of several kinds (event 1 is session_created).
std::string FillSession(SessionStore& store) {
  auto meta = store.CreateSession(test::CreateOf("acme", "read me"));
  EXPECT_TRUE(meta.ok()) << meta.status().ToString();
  const std::string id = meta->id();
  for (uint64_t i = 0; i < 10; ++i) {
    v1::AppendRequest req = AppendOf(id, 2 + 3 * i, 0, {"message " + std::to_string(i)});
    auto* call = req.add_events()->mutable_tool_call();
    call->set_call_id("c" + std::to_string(i));
    call->set_tool_name("bash");
    call->set_input_json(R"({"cmd":"ls"})");
    auto* note = req.add_events()->mutable_annotation();
    note->set_text(std::string(100 * i, 'n'));
    (*note->mutable_labels())["i"] = std::to_string(i);
    EXPECT_TRUE(store.Append(req).ok());
  }
  return id;
}

// Param: true runs against a sinew-store process through gRPC, false in process.
class ReadBytesTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { Start(); }
  void Start() {
    store_.reset();
    server_.reset();
    if (GetParam()) {
      server_ = std::make_unique<test::StoreServer>(dir_.Sub("db"));
      ASSERT_FALSE(server_->address().empty()) << "sinew-store did not start";
      auto c = ConnectSessionStore(server_->address());
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      store_ = std::move(c).value();
    } else {
      auto s = OpenSessionStore(dir_.Sub("db"), {});
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      store_ = std::move(s).value();
    }
  }
  void Stop() {
    store_.reset();
    server_.reset();
  }
  std::string FilledSession() { return FillSession(*store_); }

  testing::TempDir dir_;
  std::unique_ptr<test::StoreServer> server_;
  std::unique_ptr<SessionStore> store_;
};

TEST_P(ReadBytesTest, SameEventsAsGetEventsForEverySlice) {
  const std::string id = FilledSession();
  struct Slice {
    uint64_t from, to;
    uint32_t limit;
  };
  for (Slice s : {Slice{0, 0, 0}, Slice{1, 31, 0}, Slice{5, 9, 0}, Slice{0, 0, 3}, Slice{7, 0, 4},
                  Slice{31, 0, 0}, Slice{20, 100, 0}, Slice{32, 0, 0}, Slice{100, 0, 0}}) {
    SCOPED_TRACE("from " + std::to_string(s.from) + " to " + std::to_string(s.to) + " limit " +
                 std::to_string(s.limit));
    auto want = store_->GetEvents(EventsOf(id, s.from, s.to, s.limit));
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto page = store_->ReadEventBytes(BytesOf(id, s.from, s.to, s.limit));
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    EXPECT_EQ(page->next_seq(), 32u);
    EXPECT_EQ(page->first_seq(), want->events().empty() ? 0u : want->events(0).seq());
    ExpectSameEvents(Decoded(*page), want->events());
    // The bytes are the stored encoding itself: re-encoding the decoded event gives them.
    for (int i = 0; i < want->events_size(); ++i) {
      EXPECT_EQ(page->events(i), want->events(i).SerializeAsString());
    }
  }
}

TEST_P(ReadBytesTest, ResponseParsesAsGetEventsResponse) {
  const std::string id = FilledSession();
  auto page = store_->ReadEventBytes(BytesOf(id, 0, 0, 0));
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  v1::GetEventsResponse as_events;
  ASSERT_TRUE(as_events.ParseFromString(page->SerializeAsString()));
  auto want = AllEvents(*store_, id);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(as_events.next_seq(), want->next_seq());
  ASSERT_EQ(as_events.events_size(), want->events_size());
  for (int i = 0; i < want->events_size(); ++i) {
    EXPECT_EQ(as_events.events(i).SerializeAsString(), want->events(i).SerializeAsString());
  }
}

TEST_P(ReadBytesTest, PagesEndBeforeMaxBytesAndResumeWhereTheyEnded) {
  const std::string id = FilledSession();
  auto all = store_->ReadEventBytes(BytesOf(id, 0, 0, 0));
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->events_size(), 31);
  // A budget of exactly events 1-3 holds three of them; one byte less holds two.
  const uint64_t three = all->events(0).size() + all->events(1).size() + all->events(2).size();
  auto page = store_->ReadEventBytes(BytesOf(id, 0, 0, 0, three));
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->events_size(), 3);
  page = store_->ReadEventBytes(BytesOf(id, 0, 0, 0, three - 1));
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->events_size(), 2);
  // A budget below one event still returns one; paging from first_seq + size reads all.
  std::vector<std::string> paged;
  uint64_t from = 1;
  while (true) {
    page = store_->ReadEventBytes(BytesOf(id, from, 0, 0, 1));
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    if (page->events_size() == 0) break;
    ASSERT_EQ(page->events_size(), 1);
    ASSERT_EQ(page->first_seq(), from);
    paged.push_back(page->events(0));
    from = page->first_seq() + 1;
  }
  ASSERT_EQ(paged.size(), 31u);
  for (size_t i = 0; i < paged.size(); ++i) EXPECT_EQ(paged[i], all->events(static_cast<int>(i)));
}

TEST_P(ReadBytesTest, SeesEveryAcknowledgedAppend) {
  const std::string id = FilledSession();
  for (uint64_t next = 32; next < 37; ++next) {
    ASSERT_TRUE(store_->Append(AppendOf(id, next, 0, {"late " + std::to_string(next)})).ok());
    auto page = store_->ReadEventBytes(BytesOf(id, next, 0, 0));
    ASSERT_TRUE(page.ok());
    EXPECT_EQ(page->next_seq(), next + 1);
    ASSERT_EQ(page->events_size(), 1);
    v1::Event ev;
    ASSERT_TRUE(DecodeEvent(page->events(0), next, &ev).ok());
    EXPECT_EQ(ev.user_message().text(), "late " + std::to_string(next));
  }
}

TEST_P(ReadBytesTest, BadArgumentsAndUnknownSessionsAreRefused) {
  const std::string id = FilledSession();
  auto code = [&](const v1::ReadEventBytesRequest& req) {
    return store_->ReadEventBytes(req).status().code();
  };
  EXPECT_EQ(code(BytesOf("0123456789abcdef0123456789abcdef", 0, 0, 0)), StatusCode::kNotFound);
  EXPECT_EQ(code(BytesOf("not-an-id", 0, 0, 0)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(BytesOf("", 0, 0, 0)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(BytesOf(id, 9, 5, 0)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(BytesOf(id, 0, 0, 100001)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(BytesOf(id, 0, 0, 0, (32u << 20) + 1)), StatusCode::kInvalidArgument);
  auto err = store_->ReadEventBytes(BytesOf(id, 0, 0, 0, (32u << 20) + 1)).status();
  EXPECT_NE(err.message().find("max_bytes"), std::string::npos) << err.ToString();
  // The largest values allowed are accepted.
  EXPECT_TRUE(store_->ReadEventBytes(BytesOf(id, 0, 0, 100000, 32u << 20)).ok());
}

TEST_P(ReadBytesTest, DamagedStoredValuesAreReportedNotServed) {
  const std::string id = FilledSession();
  Stop();
  const std::string raw = *keys::ParseSessionId(id);
  // Event 5 keeps a well-formed envelope with the right seq, but its payload is damaged.
  v1::Event envelope;
  envelope.set_session_id(id);
  envelope.set_seq(5);
  std::string damaged_payload = envelope.SerializeAsString();
  damaged_payload += std::string("\x5a\x03\xff\xff\xff", 5);  // field 11 (user_message), 3 bytes
  v1::Event other;
  other.set_seq(9);
  other.mutable_user_message()->set_text("misplaced");
  {
    test::RawDb db(dir_.Sub("db"));
    db.Put(1, keys::EventKey(raw, 3), "\xff\xff\xff garbage");     // undecodable
    db.Put(1, keys::EventKey(raw, 4), other.SerializeAsString());  // another event's seq
    db.Put(1, keys::EventKey(raw, 5), damaged_payload);
  }
  Start();
  auto whole = store_->ReadEventBytes(BytesOf(id, 0, 0, 0));
  EXPECT_EQ(whole.status().code(), StatusCode::kCorruption);
  EXPECT_NE(whole.status().message().find("event 3"), std::string::npos)
      << whole.status().ToString();
  auto four = store_->ReadEventBytes(BytesOf(id, 4, 4, 0));
  EXPECT_EQ(four.status().code(), StatusCode::kCorruption);
  EXPECT_NE(four.status().message().find("event 4"), std::string::npos) << four.status().ToString();
  // The envelope check passes event 5; decoding it reports the damage.
  auto five = store_->ReadEventBytes(BytesOf(id, 5, 5, 0));
  ASSERT_TRUE(five.ok()) << five.status().ToString();
  ASSERT_EQ(five->events_size(), 1);
  v1::Event ev;
  Status decoded = DecodeEvent(five->events(0), 5, &ev);
  EXPECT_EQ(decoded.code(), StatusCode::kCorruption);
  EXPECT_NE(decoded.message().find("event 5"), std::string::npos) << decoded.ToString();
  // GetEvents reports all three as corruption too; the undamaged rest reads as before.
  v1::GetEventsRequest greq;
  greq.set_session_id(id);
  for (uint64_t seq : {3, 4, 5}) {
    greq.set_from_seq(seq);
    greq.set_to_seq(seq);
    EXPECT_EQ(store_->GetEvents(greq).status().code(), StatusCode::kCorruption) << seq;
  }
  auto rest = store_->ReadEventBytes(BytesOf(id, 6, 0, 0));
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  EXPECT_EQ(Decoded(*rest).size(), 26u);
}

// A test double of a sinew-store from before ReadEventBytes: the real service's handlers
// for what the test calls; ReadEventBytes is left to the generated base class, which
// answers UNIMPLEMENTED exactly as an older server does.
class OlderStoreService final : public v1::SessionStore::Service {
 public:
  explicit OlderStoreService(SessionStore* store) : real_(NewStoreService(store)) {}
  grpc::Status Health(grpc::ServerContext* c, const v1::HealthRequest* q, v1::HealthResponse* r) override {
    return real_->Health(c, q, r);
  }
  grpc::Status CreateSession(grpc::ServerContext* c, const v1::CreateSessionRequest* q, v1::Session* r) override {
    return real_->CreateSession(c, q, r);
  }
  grpc::Status Append(grpc::ServerContext* c, const v1::AppendRequest* q, v1::AppendResponse* r) override {
    return real_->Append(c, q, r);
  }
  grpc::Status GetEvents(grpc::ServerContext* c, const v1::GetEventsRequest* q, v1::GetEventsResponse* r) override {
    ++get_events_calls;
    return real_->GetEvents(c, q, r);
  }
  std::atomic<int> get_events_calls{0};

 private:
  std::unique_ptr<v1::SessionStore::Service> real_;
};

// A harness newer than its sinew-store (a rolling upgrade) still wakes sessions: the
// client reads through GetEvents with ReadEventBytes' slices, pages and errors.
TEST(ReadBytesFallbackTest, AnOlderStoreIsReadThroughGetEventsWithTheSamePages) {
  testing::TempDir dir;
  auto embedded = OpenSessionStore(dir.Sub("db"), {});
  ASSERT_TRUE(embedded.ok());
  OlderStoreService service(embedded->get());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(port, 0);
  auto remote = ConnectSessionStore("127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  SessionStore& store = **remote;
  const std::string id = FillSession(store);

  struct Slice {
    uint64_t from, to;
    uint32_t limit;
  };
  for (Slice s : {Slice{0, 0, 0}, Slice{5, 9, 0}, Slice{0, 0, 3}, Slice{7, 0, 4}, Slice{31, 0, 0}, Slice{32, 0, 0}}) {
    SCOPED_TRACE("from " + std::to_string(s.from) + " to " + std::to_string(s.to) + " limit " +
                 std::to_string(s.limit));
    auto want = (*embedded)->GetEvents(EventsOf(id, s.from, s.to, s.limit));
    ASSERT_TRUE(want.ok());
    auto page = store.ReadEventBytes(BytesOf(id, s.from, s.to, s.limit));
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    EXPECT_EQ(page->next_seq(), 32u);
    EXPECT_EQ(page->first_seq(), want->events().empty() ? 0u : want->events(0).seq());
    ExpectSameEvents(Decoded(*page), want->events());
  }
  EXPECT_GT(service.get_events_calls.load(), 0);
  // Pages end before the event that would pass max_bytes, and resume where they ended.
  auto all = store.ReadEventBytes(BytesOf(id, 0, 0, 0));
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->events_size(), 31);
  const uint64_t three = all->events(0).size() + all->events(1).size() + all->events(2).size();
  EXPECT_EQ(store.ReadEventBytes(BytesOf(id, 0, 0, 0, three))->events_size(), 3);
  EXPECT_EQ(store.ReadEventBytes(BytesOf(id, 0, 0, 0, three - 1))->events_size(), 2);
  uint64_t from = 1, read = 0;
  while (true) {
    auto page = store.ReadEventBytes(BytesOf(id, from, 0, 0, 1));
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    if (page->events_size() == 0) break;
    ASSERT_EQ(page->events_size(), 1);
    ASSERT_EQ(page->first_seq(), from);
    ++read;
    from = page->first_seq() + 1;
  }
  EXPECT_EQ(read, 31u);
  // The same refusals.
  auto code = [&](const v1::ReadEventBytesRequest& req) { return store.ReadEventBytes(req).status().code(); };
  EXPECT_EQ(code(BytesOf("0123456789abcdef0123456789abcdef", 0, 0, 0)), StatusCode::kNotFound);
  EXPECT_EQ(code(BytesOf("not-an-id", 0, 0, 0)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(BytesOf(id, 9, 5, 0)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(BytesOf(id, 0, 0, 100001)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(BytesOf(id, 0, 0, 0, (32u << 20) + 1)), StatusCode::kInvalidArgument);
  server->Shutdown();
}

// The store's envelope walk must never call a decodable event corrupt: for every
// truncation and many single-byte changes of real events, whenever protobuf decodes the
// bytes, the walk accepts them and finds the seq the decoder finds.
TEST(EnvelopeTest, NeverRejectsWhatProtobufDecodes) {
  std::vector<v1::Event> events(4);
  events[0].set_seq(1);
  events[0].set_session_id("0123456789abcdef0123456789abcdef");
  (*events[0].mutable_session_created()->mutable_metadata())["k"] = "v";
  events[0].mutable_session_created()->set_task_json(R"({"prompt":"p"})");
  events[1].set_seq(300);
  events[1].set_timestamp_unix_ms(1700000000000);
  events[1].set_type("user_message");
  events[1].mutable_user_message()->set_text(std::string(200, 'u'));
  events[2].set_seq(uint64_t{1} << 40);
  events[2].mutable_tool_result()->set_call_id("c1");
  events[2].mutable_tool_result()->set_output(std::string(20, '\0'));
  events[3].set_seq(7);  // a payload this build does not know: field 99, kept as unknown
  events[3].GetReflection()->MutableUnknownFields(&events[3])->AddLengthDelimited(99, "opaque");
  int decodable = 0, checked = 0;
  google::protobuf::LogSilencer quiet;  // mutated strings are often invalid UTF-8
  for (const v1::Event& original : events) {
    const std::string bytes = original.SerializeAsString();
    std::vector<std::string> variants;
    for (size_t len = 0; len <= bytes.size(); ++len) variants.push_back(bytes.substr(0, len));
    for (size_t pos = 0; pos < bytes.size(); ++pos) {
      for (unsigned char b : {0x00, 0x01, 0x7f, 0x80, 0xff}) {
        std::string v = bytes;
        v[pos] = static_cast<char>(b);
        variants.push_back(v);
      }
      variants.push_back(bytes + std::string(1, bytes[pos]));  // one byte too many
    }
    for (const std::string& v : variants) {
      v1::Event parsed;
      uint64_t seq = 0;
      const bool envelope_ok = ReadEnvelopeSeq(v, &seq);
      ++checked;
      if (!parsed.ParseFromString(v)) continue;
      ++decodable;
      ASSERT_TRUE(envelope_ok) << "decodable bytes rejected: " << keys::ToHex(v);
      EXPECT_EQ(seq, parsed.seq()) << keys::ToHex(v);
    }
  }
  EXPECT_GT(decodable, 0);
  EXPECT_GT(checked, decodable);  // some variants were undecodable, so both sides ran
}

TEST(DecodeEventTest, NamesTheSeqOfWhatItCannotUse) {
  v1::Event ev;
  ev.set_seq(4);
  ev.mutable_user_message()->set_text("hi");
  v1::Event out;
  ASSERT_TRUE(DecodeEvent(ev.SerializeAsString(), 4, &out).ok());
  EXPECT_EQ(out.user_message().text(), "hi");
  Status other = DecodeEvent(ev.SerializeAsString(), 5, &out);
  EXPECT_EQ(other.code(), StatusCode::kCorruption);
  EXPECT_NE(other.message().find("event 5 carries seq 4"), std::string::npos) << other.ToString();
  Status garbage = DecodeEvent("\xff\xff\xff", 6, &out);
  EXPECT_EQ(garbage.code(), StatusCode::kCorruption);
  EXPECT_NE(garbage.message().find("event 6"), std::string::npos) << garbage.ToString();
}

INSTANTIATE_TEST_SUITE_P(Stores, ReadBytesTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param_info) {
                           return param_info.param ? "Remote" : "Local";
                         });

}  // namespace
}  // namespace sinew::store
