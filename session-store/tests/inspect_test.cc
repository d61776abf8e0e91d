// InspectStore on directories damaged on purpose: each problem is named with its location.
#include "sinew/session_store/inspect.h"

#include <gtest/gtest.h>

#include "keys.h"
#include "raw_db.h"
#include "sinew/session_store/session_store.h"
#include "sinew/testing/subprocess.h"
#include "store_test_util.h"

namespace sinew::store {
namespace {

bool HasProblem(const IntegrityReport& r, const std::string& id, uint64_t seq,
                const std::string& kind) {
  for (const auto& p : r.problems) {
    if (p.session_id == id && p.seq == seq && p.kind == kind) return true;
  }
  return false;
}

TEST(InspectTest, HealthyStoreHasNoProblems) {
  testing::TempDir dir;
  {
    auto store = OpenSessionStore(dir.Sub("db"), {});
    ASSERT_TRUE(store.ok());
    auto id = (*store)->CreateSession(test::CreateOf("acme", "x"))->id();
    ASSERT_TRUE((*store)->Append(test::AppendOf(id, 2, 0, {"a", "b"})).ok());
  }
  auto report = InspectStore(dir.Sub("db"));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(report->sessions, 1u);
  EXPECT_EQ(report->events, 3u);
}

TEST(InspectTest, NamesEachDamageWithItsLocation) {
  testing::TempDir dir;
  std::string a, b;
  {
    auto store = OpenSessionStore(dir.Sub("db"), {});
    ASSERT_TRUE(store.ok());
    a = (*store)->CreateSession(test::CreateOf("acme", "a"))->id();
    b = (*store)->CreateSession(test::CreateOf("acme", "b"))->id();
    for (uint64_t i = 0; i < 5; ++i) {
      ASSERT_TRUE((*store)->Append(test::AppendOf(a, i + 2, 0, {"x"})).ok());
      ASSERT_TRUE((*store)->Append(test::AppendOf(b, i + 2, 0, {"y"})).ok());
    }
  }
  {
    test::RawDb raw(dir.Sub("db"));
    std::string ra = *keys::ParseSessionId(a), rb = *keys::ParseSessionId(b);
    raw.Delete(1, keys::EventKey(ra, 3));                      // a gap in a
    raw.Put(1, keys::EventKey(rb, 4), "\xff\xff\xff garbage");  // undecodable event in b
    v1::Session meta;
    meta.set_id(b);
    meta.set_next_seq(99);
    raw.Put(2, rb, meta.SerializeAsString());                  // b's metadata disagrees
  }
  auto report = InspectStore(dir.Sub("db"));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->ok());
  EXPECT_TRUE(HasProblem(*report, a, 4, "gap"));
  EXPECT_TRUE(HasProblem(*report, b, 4, "undecodable_event"));
  EXPECT_TRUE(HasProblem(*report, b, 0, "metadata_mismatch"));
  EXPECT_EQ(report->problems.size(), 3u);
  // The store itself refuses to serve the damaged log silently.
  auto store = OpenSessionStore(dir.Sub("db"), {});
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(test::AllEvents(**store, a).status().code(), StatusCode::kCorruption);
}

TEST(InspectTest, NotAStoreIsAnError) {
  testing::TempDir dir;
  auto report = InspectStore(dir.Sub("nothing-here"));
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace sinew::store
