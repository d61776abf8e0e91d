#include "stop_matcher.h"

#include <gtest/gtest.h>

namespace sinew::model {
namespace {

TEST(StopMatcher, HoldsBackPossibleStartsAndCutsAtTheStop) {
  StopMatcher matcher({"STOP", ""});
  EXPECT_EQ(matcher.Push("abc S"), "abc ");
  EXPECT_EQ(matcher.Push("T"), "");
  EXPECT_EQ(matcher.Push("x"), "STx");
  EXPECT_EQ(matcher.Push("yST"), "y");
  EXPECT_EQ(matcher.Push("OP and more"), "");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.Push("later"), "");
  EXPECT_EQ(matcher.Flush(), "");
}

TEST(StopMatcher, EarliestOfSeveralStops) {
  StopMatcher matcher({"world", "lo"});
  EXPECT_EQ(matcher.Push("hello world"), "hel");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.matched(), "lo");
}

TEST(StopMatcher, NamesNoStopWhileNotStopped) {
  StopMatcher matcher({"end"});
  EXPECT_EQ(matcher.Push("the e"), "the ");
  EXPECT_EQ(matcher.matched(), "");
  EXPECT_EQ(matcher.Push("nd"), "");
  EXPECT_EQ(matcher.matched(), "end");
}

TEST(StopMatcher, FlushReleasesHeldText) {
  StopMatcher matcher({"\nUser:"});
  EXPECT_EQ(matcher.Push("end\nUs"), "end");
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.Flush(), "\nUs");
}

TEST(StopMatcher, NoStopsPassesEverything) {
  StopMatcher matcher({});
  EXPECT_EQ(matcher.Push("anything"), "anything");
  EXPECT_EQ(matcher.Flush(), "");
}

}  // namespace
}  // namespace sinew::model
