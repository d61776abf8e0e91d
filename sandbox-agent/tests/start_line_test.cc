// StartLine, sinew-sandboxd's order of waiting container starts: owners served round
// robin, each owner's starts in order, warm-pool refills after every owner's start.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "sandboxd/start_line.h"

namespace sinew::sandbox {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using Ticket = StartLine::Ticket;

// Serves the whole line and returns the tickets in the order they were served.
std::vector<Ticket> ServeAll(StartLine& line) {
  std::vector<Ticket> order;
  while (auto next = line.Next()) {
    line.Serve(*next);
    order.push_back(*next);
  }
  return order;
}

TEST(StartLineTest, AnotherOwnersStartWaitsForAtMostOneStartOfABurst) {
  StartLine line;
  std::vector<Ticket> burst;
  for (int i = 0; i < 8; ++i) burst.push_back(line.JoinOwner("a"));
  const Ticket other = line.JoinOwner("b");
  EXPECT_EQ(line.Ahead(other), 1u);
  auto order = ServeAll(line);
  ASSERT_EQ(order.size(), 9u);
  EXPECT_EQ(order[0], burst[0]);
  EXPECT_EQ(order[1], other);
  EXPECT_EQ(std::vector<Ticket>(order.begin() + 2, order.end()),
            std::vector<Ticket>(burst.begin() + 1, burst.end()));
  EXPECT_TRUE(line.empty());
}

TEST(StartLineTest, OwnersTakeTurnsAndEachKeepsItsOwnOrder) {
  StartLine line;
  const Ticket a1 = line.JoinOwner("a");
  const Ticket a2 = line.JoinOwner("a");
  const Ticket a3 = line.JoinOwner("a");
  const Ticket b1 = line.JoinOwner("b");
  const Ticket b2 = line.JoinOwner("b");
  const Ticket c1 = line.JoinOwner("c");
  EXPECT_THAT(ServeAll(line), ElementsAre(a1, b1, c1, a2, b2, a3));
}

TEST(StartLineTest, TheEmptyOwnerIsAnOwnerOfItsOwn) {
  StartLine line;
  const Ticket a1 = line.JoinOwner("a");
  const Ticket a2 = line.JoinOwner("a");
  const Ticket anonymous = line.JoinOwner("");
  EXPECT_THAT(line.WaitingByOwner(), ElementsAre(std::pair<const std::string, uint32_t>("", 1),
                                                 std::pair<const std::string, uint32_t>("a", 2)));
  EXPECT_THAT(ServeAll(line), ElementsAre(a1, anonymous, a2));
}

TEST(StartLineTest, AnOwnerJustServedWaitsBehindAnOwnerNewToTheLine) {
  StartLine line;
  std::vector<Ticket> burst;
  for (int i = 0; i < 8; ++i) burst.push_back(line.JoinOwner("a"));
  line.Serve(burst[0]);  // the burst's first start takes the slot, then another owner comes
  const Ticket other = line.JoinOwner("b");
  EXPECT_EQ(line.Next(), other);
  EXPECT_EQ(line.Ahead(other), 0u);
  auto order = ServeAll(line);
  EXPECT_EQ(order.front(), other);
  EXPECT_EQ(std::vector<Ticket>(order.begin() + 1, order.end()),
            std::vector<Ticket>(burst.begin() + 1, burst.end()));
}

TEST(StartLineTest, AnOwnerBackRightAfterItsTurnWaitsForTheOthers) {
  StartLine line;
  const Ticket a1 = line.JoinOwner("a");
  const Ticket a2 = line.JoinOwner("a");
  const Ticket a3 = line.JoinOwner("a");
  line.Serve(a1);
  const Ticket c1 = line.JoinOwner("c");
  line.Serve(c1);  // "c" waits for nothing now, served after "a" was
  const Ticket c2 = line.JoinOwner("c");
  EXPECT_EQ(line.Next(), a2);
  // Giving up does not reset the owner's place either.
  line.Leave(c2);
  const Ticket c3 = line.JoinOwner("c");
  EXPECT_THAT(ServeAll(line), ElementsAre(a2, c3, a3));
  // An owner new to the line goes before one served earlier, also once the line emptied.
  const Ticket d1 = line.JoinOwner("d");
  const Ticket a4 = line.JoinOwner("a");
  const Ticket d2 = line.JoinOwner("d");
  EXPECT_THAT(ServeAll(line), ElementsAre(d1, a4, d2));
}

TEST(StartLineTest, AnOwnerFirstServedInAnEmptyLineStillHadItsTurn) {
  StartLine line;
  const Ticket a1 = line.JoinOwner("a");
  line.Serve(a1);  // the line is empty again
  const Ticket a2 = line.JoinOwner("a");
  const Ticket b1 = line.JoinOwner("b");
  EXPECT_THAT(ServeAll(line), ElementsAre(b1, a2));
}

TEST(StartLineTest, OwnersBeyondTheRememberedCountAsNeverServed) {
  StartLine line(/*remembered_owners=*/1);
  line.Serve(line.JoinOwner("a"));
  line.Serve(line.JoinOwner("b"));  // "a"'s serve is forgotten, "b"'s kept
  const Ticket b = line.JoinOwner("b");
  const Ticket a = line.JoinOwner("a");
  const Ticket c = line.JoinOwner("c");
  EXPECT_THAT(ServeAll(line), ElementsAre(a, c, b));
}

TEST(StartLineTest, RefillsWaitForEveryOwnersStart) {
  StartLine line;
  const Ticket refill1 = line.JoinRefill();
  const Ticket refill2 = line.JoinRefill();
  EXPECT_EQ(line.Next(), refill1);
  const Ticket a1 = line.JoinOwner("a");
  const Ticket b1 = line.JoinOwner("b");
  EXPECT_EQ(line.Ahead(refill1), 2u);
  EXPECT_EQ(line.Ahead(refill2), 3u);
  EXPECT_EQ(line.waiting_refills(), 2u);
  EXPECT_THAT(ServeAll(line), ElementsAre(a1, b1, refill1, refill2));
}

TEST(StartLineTest, AStartThatGivesUpLeavesAndFreesItsTurn) {
  StartLine line;
  const Ticket a1 = line.JoinOwner("a");
  const Ticket a2 = line.JoinOwner("a");
  const Ticket b1 = line.JoinOwner("b");
  const Ticket refill = line.JoinRefill();
  line.Leave(a1);
  EXPECT_EQ(line.Next(), a2);
  line.Leave(b1);
  EXPECT_THAT(line.WaitingByOwner(), ElementsAre(std::pair<const std::string, uint32_t>("a", 1)));
  line.Leave(refill);
  EXPECT_EQ(line.waiting_refills(), 0u);
  line.Leave(b1);      // no longer waiting: no-op
  line.Leave(a2 + 9);  // never issued: no-op
  EXPECT_THAT(ServeAll(line), ElementsAre(a2));
  EXPECT_THAT(line.WaitingByOwner(), IsEmpty());
}

TEST(StartLineTest, AheadCountsTheStartsServedBeforeEachTicket) {
  StartLine line;
  std::vector<Ticket> tickets;
  for (const char* owner : {"a", "a", "b", "a", "", "c", "b", "a", "c", ""})
    tickets.push_back(line.JoinOwner(owner));
  tickets.push_back(line.JoinRefill());
  line.Serve(*line.Next());  // "a" moves to the back of the rotation
  line.Leave(tickets[6]);    // the second "b"
  tickets.push_back(line.JoinOwner("b"));
  tickets.push_back(line.JoinRefill());
  std::map<Ticket, size_t> ahead;
  for (Ticket t : tickets) {
    if (t != tickets[0] && t != tickets[6]) ahead[t] = line.Ahead(t);
  }
  auto order = ServeAll(line);
  ASSERT_EQ(order.size(), ahead.size());
  for (size_t i = 0; i < order.size(); ++i)
    EXPECT_EQ(ahead.at(order[i]), i) << "ticket " << order[i];
}

}  // namespace
}  // namespace sinew::sandbox
