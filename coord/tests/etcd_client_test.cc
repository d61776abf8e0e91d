// The etcd client, LeasedKey and PrefixMirror against a real etcd process on loopback.
#include <gtest/gtest.h>

#include <thread>

#include "etcd_process.h"
#include "sinew/coord/etcd_client.h"
#include "sinew/coord/leased_key.h"
#include "sinew/coord/prefix_mirror.h"
#include "sinew/testing/certs.h"

namespace sinew::coord {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Polls `pred` every 20 ms until it holds or `timeout` passes.
template <typename Pred>
bool Eventually(Pred pred, milliseconds timeout = seconds(15)) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return pred();
}

class EtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::EtcdBinary().empty())
      GTEST_SKIP() << "etcd is not installed (etcd-server, scripts/install-deps.sh)";
    etcd_ = std::make_unique<test::EtcdProcess>();
    ASSERT_FALSE(etcd_->endpoint().empty()) << "etcd did not start";
    auto c = EtcdClient::Connect(etcd_->endpoint());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
  }
  std::unique_ptr<test::EtcdProcess> etcd_;
  std::unique_ptr<EtcdClient> client_;
};

TEST(PrefixEndTest, CoversExactlyTheKeysWithThePrefix) {
  EXPECT_EQ(PrefixEnd("/a/"), "/a0");
  EXPECT_EQ(PrefixEnd(std::string("a\xff", 2)), "b");
  EXPECT_EQ(PrefixEnd(""), std::string(1, '\0'));
}

TEST(EtcdConnectTest, RejectsAnEndpointWithoutPort) {
  EXPECT_EQ(EtcdClient::Connect("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EtcdClient::Connect("localhost").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(EtcdTest, PutGetPrefixAndDelete) {
  auto r1 = client_->Put("/t/a", "1");
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  ASSERT_TRUE(client_->Put("/t/b", "2").ok());
  ASSERT_TRUE(client_->Put("/u/c", "3").ok());
  auto listing = client_->GetPrefix("/t/");
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  ASSERT_EQ(listing->kvs.size(), 2u);
  EXPECT_EQ(listing->kvs[0].key, "/t/a");
  EXPECT_EQ(listing->kvs[0].value, "1");
  EXPECT_EQ(listing->kvs[1].value, "2");
  EXPECT_GE(listing->revision, *r1 + 2);
  EXPECT_EQ(*client_->Delete("/t/a"), 1);
  EXPECT_EQ(*client_->Delete("/t/a"), 0);
  EXPECT_EQ(client_->GetPrefix("/t/")->kvs.size(), 1u);
}

TEST_F(EtcdTest, ALeasedKeyGoesWithItsLease) {
  auto lease = client_->GrantLease(30);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_GT(lease->id, 0);
  ASSERT_TRUE(client_->Put("/l/x", "v", lease->id).ok());
  EXPECT_EQ(client_->GetPrefix("/l/")->kvs.at(0).lease, lease->id);
  auto ttl = client_->KeepAliveOnce(lease->id);
  ASSERT_TRUE(ttl.ok()) << ttl.status().ToString();
  EXPECT_EQ(*ttl, 30);
  ASSERT_TRUE(client_->RevokeLease(lease->id).ok());
  EXPECT_TRUE(client_->GetPrefix("/l/")->kvs.empty());
  EXPECT_EQ(*client_->KeepAliveOnce(lease->id), 0);  // gone
  EXPECT_FALSE(client_->Put("/l/y", "v", lease->id).ok());
}

TEST_F(EtcdTest, AnExpiredLeaseTakesItsKeyWithinTheTtl) {
  auto lease = client_->GrantLease(1);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(client_->Put("/e/x", "v", lease->id).ok());
  EXPECT_TRUE(Eventually([&] { return client_->GetPrefix("/e/")->kvs.empty(); }, seconds(5)));
}

TEST_F(EtcdTest, LeasedKeyWritesChangesAndRevokesOnDestruction) {
  auto key = LeasedKey::Create(client_.get(), "/k/host", "v1", {.ttl_seconds = 2});
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(client_->GetPrefix("/k/")->kvs.at(0).value, "v1");
  (*key)->Set("v2");
  EXPECT_TRUE(Eventually([&] { return client_->GetPrefix("/k/")->kvs.at(0).value == "v2"; }));
  // Kept alive across several TTLs.
  std::this_thread::sleep_for(milliseconds(4500));
  ASSERT_EQ(client_->GetPrefix("/k/")->kvs.size(), 1u);
  key->reset();
  EXPECT_TRUE(client_->GetPrefix("/k/")->kvs.empty());
}

TEST_F(EtcdTest, LeasedKeyComesBackWhenEtcdLostItsLease) {
  auto key = LeasedKey::Create(client_.get(), "/k/host", "v1", {.ttl_seconds = 2});
  ASSERT_TRUE(key.ok());
  const int64_t first = (*key)->lease_id();
  ASSERT_TRUE(client_->RevokeLease(first).ok());  // as if it had expired
  EXPECT_TRUE(client_->GetPrefix("/k/")->kvs.empty());
  EXPECT_TRUE(Eventually([&] { return client_->GetPrefix("/k/")->kvs.size() == 1; }));
  EXPECT_EQ((*key)->regrants(), 1u);
  EXPECT_NE((*key)->lease_id(), first);
  EXPECT_EQ(client_->GetPrefix("/k/")->kvs.at(0).lease, (*key)->lease_id());
}

TEST_F(EtcdTest, LeasedKeySurvivesAnEtcdRestart) {
  auto key = LeasedKey::Create(client_.get(), "/k/host", "v1", {.ttl_seconds = 2});
  ASSERT_TRUE(key.ok());
  etcd_->Kill();
  (*key)->Set("v2");  // written once etcd is back
  std::this_thread::sleep_for(milliseconds(3000));
  ASSERT_TRUE(etcd_->Start());
  EXPECT_TRUE(Eventually([&] {
    auto l = client_->GetPrefix("/k/");
    return l.ok() && l->kvs.size() == 1 && l->kvs[0].value == "v2";
  }));
  // And stays: the lease is renewed (or granted anew) after the restart.
  std::this_thread::sleep_for(milliseconds(3000));
  EXPECT_EQ(client_->GetPrefix("/k/")->kvs.size(), 1u);
}

TEST_F(EtcdTest, MirrorFollowsPutsDeletesAndLeaseExpiry) {
  ASSERT_TRUE(client_->Put("/m/a", "1").ok());
  auto mirror = PrefixMirror::Start(client_.get(), "/m/");
  ASSERT_TRUE(mirror->WaitSynced(seconds(10)));
  EXPECT_EQ(mirror->Snapshot().at("/m/a").value, "1");
  ASSERT_TRUE(client_->Put("/m/b", "2").ok());
  ASSERT_TRUE(client_->Put("/other", "x").ok());
  EXPECT_TRUE(Eventually([&] { return mirror->Snapshot().count("/m/b") == 1; }));
  ASSERT_TRUE(client_->Delete("/m/a").ok());
  EXPECT_TRUE(Eventually([&] { return mirror->Snapshot().count("/m/a") == 0; }));
  auto lease = client_->GrantLease(1);
  ASSERT_TRUE(client_->Put("/m/c", "3", lease->id).ok());
  EXPECT_TRUE(Eventually([&] { return mirror->Snapshot().count("/m/c") == 1; }));
  EXPECT_TRUE(Eventually([&] { return mirror->Snapshot().count("/m/c") == 0; }, seconds(5)));
  EXPECT_EQ(mirror->Snapshot().size(), 1u);
  EXPECT_EQ(mirror->Snapshot().count("/other"), 0u);
}

TEST_F(EtcdTest, MirrorKeepsItsContentsWhileEtcdIsDownAndResumesAfterARestart) {
  ASSERT_TRUE(client_->Put("/m/a", "1").ok());
  auto mirror = PrefixMirror::Start(client_.get(), "/m/");
  ASSERT_TRUE(mirror->WaitSynced(seconds(10)));
  etcd_->Kill();
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_EQ(mirror->Snapshot().size(), 1u);  // the last known contents
  ASSERT_TRUE(etcd_->Start());
  ASSERT_TRUE(client_->Put("/m/b", "2").ok());
  ASSERT_TRUE(client_->Delete("/m/a").ok());
  EXPECT_TRUE(Eventually([&] {
    auto s = mirror->Snapshot();
    return s.size() == 1 && s.count("/m/b") == 1;
  }));
  EXPECT_GE(mirror->resumes(), 1u);
  EXPECT_EQ(mirror->relists(), 0u);
}

TEST_F(EtcdTest, AWatchFromACompactedRevisionSaysWhereHistoryStarts) {
  auto first = client_->Put("/w/a", "1");
  ASSERT_TRUE(first.ok());
  auto last = client_->Put("/w/a", "2");
  ASSERT_TRUE(client_->Put("/w/a", "3").ok());
  ASSERT_TRUE(client_->Compact(*last).ok());
  auto handle = client_->NewWatchHandle();
  int64_t compacted = 0;
  Status s = client_->Watch(
      "/w/", *first, handle.get(), [](const std::vector<WatchEvent>&, int64_t) { return true; },
      &compacted);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.ToString();
  EXPECT_EQ(compacted, *last);
  // From a kept revision it delivers the history in order.
  std::vector<std::string> seen;
  s = client_->Watch(
      "/w/", *last, handle.get(),
      [&](const std::vector<WatchEvent>& events, int64_t) {
        for (const auto& e : events) seen.push_back(e.kv.value);
        return seen.size() < 2;
      },
      &compacted);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(seen, (std::vector<std::string>{"2", "3"}));
}

// TLS to etcd (docs/security.md): etcd serves only https and requires a client
// certificate from its CA (--client-cert-auth). Two CAs: "ca1" is etcd's, "ca2" a stranger.
class EtcdTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::EtcdBinary().empty())
      GTEST_SKIP() << "etcd is not installed (etcd-server, scripts/install-deps.sh)";
    testing::MakeCerts(certs_.Sub("ca1"), {"etcd", "client"});
    testing::MakeCerts(certs_.Sub("ca2"), {"etcd", "client"});
    test::EtcdTls tls;
    tls.server = Identity("ca1", "etcd", "ca1");
    tls.client = Identity("ca1", "client", "ca1");
    etcd_ = std::make_unique<test::EtcdProcess>(tls);
    ASSERT_FALSE(etcd_->endpoint().empty()) << "etcd did not start with TLS";
  }
  // `name`'s certificate from `identity_ca`, trusting `trusted_ca`.
  GrpcTlsOptions Identity(const std::string& identity_ca, const std::string& name, const std::string& trusted_ca) {
    return testing::CertFiles(certs_.Sub(identity_ca), name, certs_.Sub(trusted_ca));
  }
  // The result of one Put with `tls` (a short call timeout: a refused handshake shows as
  // UNAVAILABLE once the deadline passes).
  Status PutWith(const GrpcTlsOptions& tls) {
    auto c = EtcdClient::Connect(etcd_->endpoint(), seconds(2), tls);
    if (!c.ok()) return c.status();
    auto put = (*c)->Put("/tls/k", "v");
    return put.ok() ? Status::Ok() : put.status();
  }
  testing::TempDir certs_{"sinew-etcd-certs"};
  std::unique_ptr<test::EtcdProcess> etcd_;
};

TEST_F(EtcdTlsTest, AClientWithACertificateFromEtcdsCaTalks) {
  auto c = EtcdClient::Connect(etcd_->endpoint(), seconds(2), Identity("ca1", "client", "ca1"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE((*c)->Put("/tls/a", "1").ok());
  auto listing = (*c)->GetPrefix("/tls/");
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  ASSERT_EQ(listing->kvs.size(), 1u);
  EXPECT_EQ(listing->kvs[0].value, "1");
}

TEST_F(EtcdTlsTest, PlainClientsStrangersAndWrongNamesAreRefused) {
  // No TLS at all against an https-only etcd.
  EXPECT_EQ(PutWith(GrpcTlsOptions{}).code(), StatusCode::kUnavailable);
  // A certificate from another CA: etcd refuses the client.
  EXPECT_EQ(PutWith(Identity("ca2", "client", "ca1")).code(), StatusCode::kUnavailable);
  // Trusting another CA: the client refuses etcd.
  EXPECT_EQ(PutWith(Identity("ca1", "client", "ca2")).code(), StatusCode::kUnavailable);
  // etcd's certificate does not carry the name the client asks for.
  GrpcTlsOptions wrong_name = Identity("ca1", "client", "ca1");
  wrong_name.server_name_override = "not-etcd.example";
  EXPECT_EQ(PutWith(wrong_name).code(), StatusCode::kUnavailable);
  // None of them wrote anything.
  auto c = EtcdClient::Connect(etcd_->endpoint(), seconds(2), Identity("ca1", "client", "ca1"));
  ASSERT_TRUE(c.ok());
  auto listing = (*c)->GetPrefix("/tls/");
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  EXPECT_TRUE(listing->kvs.empty());
}

TEST_F(EtcdTlsTest, UnusableFilesAreNamedAtConnect) {
  GrpcTlsOptions missing = Identity("ca1", "client", "ca1");
  missing.key_file = certs_.Sub("nowhere-key.pem");
  auto c = EtcdClient::Connect(etcd_->endpoint(), seconds(2), missing);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("nowhere-key.pem"), std::string::npos) << c.status().ToString();
  GrpcTlsOptions partial;
  partial.ca_file = certs_.Sub("ca1/ca.pem");
  EXPECT_EQ(EtcdClient::Connect(etcd_->endpoint(), seconds(2), partial).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sinew::coord
