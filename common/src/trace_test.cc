#include "sinew/trace.h"

#include <gtest/gtest.h>

namespace sinew {
namespace {

constexpr const char* kValid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(TraceparentTest, ParsesAndFormatsTheSpecExample) {
  auto tp = ParseTraceparent(kValid);
  ASSERT_TRUE(tp.has_value());
  EXPECT_EQ(tp->TraceIdHex(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(tp->SpanIdHex(), "00f067aa0ba902b7");
  EXPECT_EQ(tp->flags, 0x01);
  EXPECT_EQ(FormatTraceparent(*tp), kValid);
  auto unsampled = ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  ASSERT_TRUE(unsampled.has_value());
  EXPECT_EQ(unsampled->flags, 0x00);
}

TEST(TraceparentTest, RefusesWhatTheSpecSaysToIgnore) {
  for (const char* bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",          // no flags
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",      // v00 with more
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",      // v00 with more
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",       // version ff
           "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",       // version not hex
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",       // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",       // zero span id
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",       // upper case
           "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",       // separator
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0z",       // flags not hex
           "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",       // misplaced dash
           "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",      // future, no dash
       }) {
    EXPECT_FALSE(ParseTraceparent(bad).has_value()) << bad;
  }
  std::string nul(kValid);
  nul[10] = '\0';
  EXPECT_FALSE(ParseTraceparent(nul).has_value());
}

TEST(TraceparentTest, ReadsAFutureVersionByItsFirstFields) {
  auto tp = ParseTraceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds");
  ASSERT_TRUE(tp.has_value());
  EXPECT_EQ(tp->TraceIdHex(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_TRUE(ParseTraceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").has_value());
}

TEST(TraceparentTest, NewIdsAreLowerHexAndDiffer) {
  const std::string a = NewTraceIdHex(), b = NewTraceIdHex();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
  EXPECT_EQ(NewSpanIdHex().size(), 16u);
  EXPECT_TRUE(ParseTraceparent("00-" + a + "-" + NewSpanIdHex() + "-01").has_value());
}

TEST(TraceparentTest, SessionTraceIdIsStableAndValid) {
  const std::string session = "0192f3a1b2c3d4e5f60718293a4b5c6d";
  EXPECT_EQ(TraceIdForSession(session), session);
  // Not a session-store id: hashed, the same every time, and a valid trace id.
  const std::string hashed = TraceIdForSession("not-a-store-id");
  EXPECT_EQ(hashed, TraceIdForSession("not-a-store-id"));
  EXPECT_NE(hashed, TraceIdForSession("not-a-store-id2"));
  EXPECT_TRUE(ParseTraceparent("00-" + hashed + "-00f067aa0ba902b7-01").has_value());
  const std::string zeros(32, '0');
  EXPECT_NE(TraceIdForSession(zeros), zeros);
  EXPECT_TRUE(ParseTraceparent("00-" + TraceIdForSession(zeros) + "-00f067aa0ba902b7-01").has_value());
}

TEST(LogContextTest, ScopesNestAndOutgoingCallsGetFreshSpans) {
  EXPECT_EQ(OutgoingTraceparent(), "");
  {
    LogFields f;
    f.session = "s1";
    f.trace_id = TraceIdForSession("0192f3a1b2c3d4e5f60718293a4b5c6d");
    ScopedLogContext outer(f);
    SetLogSeq(4);
    EXPECT_EQ(CurrentLogFields().seq, 4u);
    const std::string one = OutgoingTraceparent(), two = OutgoingTraceparent();
    auto p1 = ParseTraceparent(one), p2 = ParseTraceparent(two);
    ASSERT_TRUE(p1 && p2) << one << " " << two;
    EXPECT_EQ(p1->TraceIdHex(), "0192f3a1b2c3d4e5f60718293a4b5c6d");
    EXPECT_EQ(p1->TraceIdHex(), p2->TraceIdHex());
    EXPECT_NE(p1->SpanIdHex(), p2->SpanIdHex());
    {
      ScopedLogContext inner(LogFields{.session = "s2"});
      EXPECT_EQ(CurrentLogFields().session, "s2");
      EXPECT_EQ(OutgoingTraceparent(), "");
    }
    EXPECT_EQ(CurrentLogFields().session, "s1");
    EXPECT_EQ(CurrentLogFields().seq, 4u);
  }
  EXPECT_TRUE(CurrentLogFields().session.empty());
}

TEST(LogContextTest, IncomingHeaderContinuesItsTraceOrStartsANewOne) {
  LogFields f = FieldsForIncoming(kValid);
  EXPECT_EQ(f.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  ASSERT_EQ(f.extra.size(), 1u);
  EXPECT_EQ(f.extra[0].first, "parent_span_id");
  EXPECT_EQ(f.extra[0].second, "00f067aa0ba902b7");
  EXPECT_EQ(f.span_id.size(), 16u);
  EXPECT_NE(f.span_id, "00f067aa0ba902b7");
  for (const char* bad : {"", "garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}) {
    LogFields n = FieldsForIncoming(bad);
    EXPECT_EQ(n.trace_id.size(), 32u) << bad;
    EXPECT_NE(n.trace_id, "00000000000000000000000000000000");
    EXPECT_TRUE(n.extra.empty()) << bad << ": no parent span";
  }
}

}  // namespace
}  // namespace sinew
