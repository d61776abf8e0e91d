// Leases and fenced appends on the embedded store.
#include <gtest/gtest.h>

#include <thread>

#include "sinew/session_store/session_store.h"
#include "sinew/testing/subprocess.h"
#include "store_test_util.h"

namespace sinew::store {
namespace {

using std::chrono::milliseconds;
using test::AllEvents;
using test::AppendOf;

class LeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = OpenSessionStore(dir_.Sub("db"), {});
    ASSERT_TRUE(s.ok());
    store_ = std::move(s).value();
    id_ = store_->CreateSession(test::CreateOf("acme", "t"))->id();
  }
  testing::TempDir dir_;
  std::unique_ptr<SessionStore> store_;
  std::string id_;
};

TEST_F(LeaseTest, AcquireRenewReleaseAndEpochs) {
  auto a = store_->AcquireLease(id_, {"harness-a", ""}, milliseconds(60000));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->epoch(), 1u);
  // The holder re-acquiring keeps its epoch; another owner is refused while it is live.
  EXPECT_EQ(store_->AcquireLease(id_, {"harness-a", ""}, milliseconds(60000))->epoch(), 1u);
  auto b = store_->AcquireLease(id_, {"harness-b", ""}, milliseconds(60000));
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(b.status().message().find("harness-a"), std::string::npos);
  auto renewed = store_->RenewLease(id_, "harness-a", 1, milliseconds(60000));
  ASSERT_TRUE(renewed.ok());
  EXPECT_EQ(store_->RenewLease(id_, "harness-b", 1, milliseconds(1000)).status().code(),
            StatusCode::kAborted);
  ASSERT_TRUE(store_->ReleaseLease(id_, "harness-a", 1).ok());
  // After release the next acquire raises the epoch.
  auto c = store_->AcquireLease(id_, {"harness-b", ""}, milliseconds(60000));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->epoch(), 2u);
  EXPECT_EQ(store_->GetSession(id_)->lease_epoch(), 2u);
  EXPECT_EQ(store_->RenewLease(id_, "harness-a", 1, milliseconds(1000)).status().code(),
            StatusCode::kAborted);
  EXPECT_EQ(store_->AcquireLease(id_, {"", ""}, milliseconds(10)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->AcquireLease(id_, {"x", ""}, milliseconds(0)).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(LeaseTest, GetSessionNamesTheLiveHolderAndItsUrlOnly) {
  EXPECT_FALSE(store_->GetSession(id_)->has_lease());
  ASSERT_TRUE(store_->AcquireLease(id_, {"harness-a", "https://10.0.0.7:8080"}, milliseconds(60000)).ok());
  auto meta = store_->GetSession(id_);
  ASSERT_TRUE(meta->has_lease());
  EXPECT_EQ(meta->lease().owner(), "harness-a");
  EXPECT_EQ(meta->lease().holder_url(), "https://10.0.0.7:8080");
  EXPECT_EQ(meta->lease().epoch(), 1u);
  // The refusal to another owner is a status; the holder is read from GetSession, as data.
  EXPECT_EQ(store_->AcquireLease(id_, {"harness-b", "https://b"}, milliseconds(100)).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->GetSession(id_)->lease().holder_url(), "https://10.0.0.7:8080");
  // A refused acquire with an over-long URL changes nothing.
  EXPECT_EQ(store_->AcquireLease(id_, {"harness-a", std::string(4096, 'u')}, milliseconds(100)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->GetSession(id_)->lease().holder_url(), "https://10.0.0.7:8080");
  ASSERT_TRUE(store_->ReleaseLease(id_, "harness-a", 1).ok());
  EXPECT_FALSE(store_->GetSession(id_)->has_lease());
  // Expiry hides it too.
  ASSERT_TRUE(store_->AcquireLease(id_, {"harness-c", "http://c"}, milliseconds(30)).ok());
  std::this_thread::sleep_for(milliseconds(60));
  EXPECT_FALSE(store_->GetSession(id_)->has_lease());
}

TEST_F(LeaseTest, AcquireAfterExpiryRaisesEpochAndFencesTheOldHolder) {
  auto a = store_->AcquireLease(id_, {"harness-a", ""}, milliseconds(50));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(store_->Append(AppendOf(id_, 2, a->epoch(), {"from a"})).ok());
  std::this_thread::sleep_for(milliseconds(80));
  auto b = store_->AcquireLease(id_, {"harness-b", ""}, milliseconds(60000));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->epoch(), a->epoch() + 1);
  // Taken by another: the old holder can neither renew nor append.
  EXPECT_EQ(store_->RenewLease(id_, "harness-a", a->epoch(), milliseconds(50)).status().code(),
            StatusCode::kAborted);
  EXPECT_EQ(store_->Append(AppendOf(id_, 3, a->epoch(), {"late a"})).status().code(),
            StatusCode::kAborted);
  EXPECT_EQ(store_->Append(AppendOf(id_, 3, 0, {"unfenced"})).status().code(),
            StatusCode::kAborted);
  ASSERT_TRUE(store_->Append(AppendOf(id_, 3, b->epoch(), {"from b"})).ok());
  auto events = AllEvents(*store_, id_);
  ASSERT_EQ(events->events_size(), 3);
  EXPECT_EQ(events->events(2).user_message().text(), "from b");
}

// A holder that renews or writes late (a loaded machine, a paused process) keeps its lease
// as long as nobody took it: lateness alone never makes a process give up its own work.
TEST_F(LeaseTest, AnExpiredLeaseNobodyTookIsStillItsHolders) {
  auto a = store_->AcquireLease(id_, {"harness-a", ""}, milliseconds(50));
  ASSERT_TRUE(a.ok());
  std::this_thread::sleep_for(milliseconds(80));
  EXPECT_FALSE(store_->GetSession(id_)->has_lease()) << "an expired lease is not reported live";
  ASSERT_TRUE(store_->Append(AppendOf(id_, 2, a->epoch(), {"late but alone"})).ok());
  auto renewed = store_->RenewLease(id_, "harness-a", a->epoch(), milliseconds(60000));
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  EXPECT_EQ(renewed->epoch(), a->epoch());
  // Renewed: live again, so another owner cannot take it.
  EXPECT_EQ(store_->AcquireLease(id_, {"harness-b", ""}, milliseconds(100)).status().code(),
            StatusCode::kFailedPrecondition);
  // Nobody else can pass for the holder: not another owner, not another epoch.
  EXPECT_EQ(store_->RenewLease(id_, "harness-b", a->epoch(), milliseconds(50)).status().code(),
            StatusCode::kAborted);
  EXPECT_EQ(store_->RenewLease(id_, "harness-a", a->epoch() + 1, milliseconds(50)).status().code(),
            StatusCode::kAborted);
  // Released: over for good, even for the holder.
  ASSERT_TRUE(store_->ReleaseLease(id_, "harness-a", a->epoch()).ok());
  EXPECT_EQ(store_->RenewLease(id_, "harness-a", a->epoch(), milliseconds(50)).status().code(),
            StatusCode::kAborted);
  EXPECT_EQ(store_->Append(AppendOf(id_, 3, a->epoch(), {"after release"})).status().code(),
            StatusCode::kAborted);
  auto events = AllEvents(*store_, id_);
  ASSERT_EQ(events->events_size(), 2);
  EXPECT_EQ(events->events(1).user_message().text(), "late but alone");
}

TEST_F(LeaseTest, LeasesSurviveReopen) {
  auto a = store_->AcquireLease(id_, {"harness-a", ""}, milliseconds(60000));
  ASSERT_TRUE(a.ok());
  store_.reset();
  auto s = OpenSessionStore(dir_.Sub("db"), {});
  ASSERT_TRUE(s.ok());
  store_ = std::move(s).value();
  EXPECT_EQ(store_->AcquireLease(id_, {"harness-b", ""}, milliseconds(100)).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store_->Append(AppendOf(id_, 2, a->epoch(), {"still mine"})).ok());
}

}  // namespace
}  // namespace sinew::store
