// Crash safety by crashing: a writer process appends in sync mode while this test
// SIGKILLs it at random moments and restarts it. After every kill the log must hold every
// acknowledged event, in order, with no gap and no duplicate.
// Cycles: $SINEW_CRASH_CYCLES (default 50; the `long` ctest label runs 500).
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <random>
#include <thread>

#include "sinew/session_store/session_store.h"
#include "sinew/testing/subprocess.h"

namespace sinew::store {
namespace {

// Checks the log from event `from` on (1: the whole log); returns the number of events.
uint64_t VerifyLog(const std::string& db, const std::string& id, uint64_t acked,
                   uint64_t from) {
  auto store = OpenSessionStore(db, {});
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (!store.ok()) return 0;
  // Read the whole log page by page.
  google::protobuf::RepeatedPtrField<v1::Event> evs;
  v1::GetEventsRequest req;
  req.set_session_id(id);
  req.set_limit(10000);
  for (uint64_t page_from = from;; page_from += 10000) {
    req.set_from_seq(page_from);
    auto page = (*store)->GetEvents(req);
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    if (!page.ok()) return 0;
    if (page->events_size() == 0) break;
    for (auto& ev : *page->mutable_events()) *evs.Add() = std::move(ev);
  }
  const uint64_t len = from - 1 + static_cast<uint64_t>(evs.size());
  EXPECT_GE(len, acked) << "acknowledged events were lost";
  for (int i = 0; i < evs.size(); ++i) {
    uint64_t seq = from + static_cast<uint64_t>(i);
    EXPECT_EQ(evs[i].seq(), seq);
    if (seq == 1) {
      EXPECT_TRUE(evs[i].has_session_created());
    } else {
      EXPECT_EQ(evs[i].annotation().text(), "n=" + std::to_string(seq))
          << "event " << seq << " is out of place (duplicate or gap)";
    }
  }
  EXPECT_EQ((*store)->GetSession(id)->next_seq(), len + 1);
  return len;
}

void RunCrashLoop(const std::string& durability) {
  int cycles = 50;
  if (const char* env = std::getenv("SINEW_CRASH_CYCLES")) cycles = std::atoi(env);
  testing::TempDir dir;
  const std::string db = dir.Sub("db");
  std::mt19937 rng(12345);
  std::string id;
  uint64_t acked = 0;
  uint64_t previous_len = 0;
  int kills_mid_append = 0;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    testing::Subprocess writer(
        {testing::BinaryPath("sinew-store-crash-writer"), db, durability});
    auto first = writer.ReadLine(std::chrono::seconds(30));
    ASSERT_TRUE(first && first->rfind("SESSION ", 0) == 0) << "writer did not start";
    std::string this_id = first->substr(8);
    if (id.empty()) id = this_id;
    ASSERT_EQ(this_id, id) << "writer created a second session";
    // Let it run a random while, then kill it without warning.
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 120));
    writer.Signal(SIGKILL);
    writer.Wait();
    while (auto line = writer.ReadLine(std::chrono::milliseconds(500))) {
      if (line->rfind("ACK ", 0) == 0) acked = std::max<uint64_t>(acked, std::stoull(line->substr(4)));
    }
    // The tail since the last check (with some overlap); the whole log at the end.
    uint64_t len = VerifyLog(db, id, acked, previous_len > 10 ? previous_len - 10 : 1);
    if (len > acked) ++kills_mid_append;  // died after the write, before the ack
    ASSERT_GE(len, previous_len) << "the log shrank after a crash";
    previous_len = len;
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_EQ(VerifyLog(db, id, acked, 1), previous_len);
  EXPECT_GT(acked, static_cast<uint64_t>(cycles)) << "the writer made too little progress";
  std::printf("%d kills, %llu events acknowledged, %llu in the log, %d kills between write and ack\n",
              cycles, static_cast<unsigned long long>(acked),
              static_cast<unsigned long long>(previous_len), kills_mid_append);
}

TEST(CrashTest, SyncWriterKilledRepeatedlyLosesNothing) { RunCrashLoop("sync"); }

// Async mode promises to survive process crashes (not machine crashes): same check.
TEST(CrashTest, AsyncWriterKilledRepeatedlyLosesNothing) { RunCrashLoop("async"); }

}  // namespace
}  // namespace sinew::store
