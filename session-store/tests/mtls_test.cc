// mTLS on the store's gRPC link: sinew-store as a real process on loopback with
// certificates made by scripts/make-certs.sh, dialled by the remote client and by raw
// gRPC channels that lack one part of the identity each.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "sinew/grpc_tls.h"
#include "sinew/proto/session_store.grpc.pb.h"
#include "sinew/session_store/session_store.h"
#include "sinew/testing/certs.h"
#include "sinew/testing/subprocess.h"
#include "store_test_util.h"

namespace sinew::store {
namespace {

using namespace std::chrono_literals;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Two independent CAs, each with a server ("store") and a client ("harness") identity.
class Certs {
 public:
  Certs() {
    testing::MakeCerts(dir_.Sub("ca1"), {"store", "harness"});
    testing::MakeCerts(dir_.Sub("ca2"), {"store", "harness"});
  }
  std::string File(const std::string& ca, const std::string& name) const { return dir_.Sub(ca + "/" + name); }
  GrpcTlsOptions Client(const std::string& identity_ca, const std::string& trusted_ca) const {
    GrpcTlsOptions tls;
    tls.cert_file = File(identity_ca, "harness.pem");
    tls.key_file = File(identity_ca, "harness-key.pem");
    tls.ca_file = File(trusted_ca, "ca.pem");
    return tls;
  }

 private:
  testing::TempDir dir_{"sinew-mtls-certs"};
};

class StoreMtlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { certs_ = new Certs(); }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }

  // Copies CA `ca`'s store identity into the live files the server reads.
  void InstallServerFiles(const std::string& ca) {
    testing::ReplaceFile(certs_->File(ca, "store.pem"), dir_.Sub("store.pem"));
    testing::ReplaceFile(certs_->File(ca, "store-key.pem"), dir_.Sub("store-key.pem"));
    testing::ReplaceFile(certs_->File(ca, "ca.pem"), dir_.Sub("ca.pem"));
  }
  std::vector<std::string> ServerArgs() const {
    return {testing::BinaryPath("sinew-store"), "--db", dir_.Sub("db"), "--listen", "127.0.0.1:0",
            "--tls-cert", dir_.Sub("store.pem"), "--tls-key", dir_.Sub("store-key.pem"),
            "--tls-ca", dir_.Sub("ca.pem"), "--tls-refresh-seconds", "1"};
  }
  void SetUp() override {
    InstallServerFiles("ca1");
    server_ = std::make_unique<testing::Subprocess>(ServerArgs());
    auto line = server_->WaitForLine("listening on", 20s);
    ASSERT_TRUE(line) << "sinew-store did not start";
    address_ = line->substr(line->rfind(' ') + 1);
  }

  Result<std::unique_ptr<SessionStore>> Connect(const GrpcTlsOptions& tls,
                                                std::chrono::milliseconds timeout = 2s) {
    RemoteOptions options;
    options.tls = tls;
    options.connect_timeout = timeout;
    return ConnectSessionStore(address_, options);
  }
  // One Health call on a fresh channel with these credentials, without waiting for a
  // connection that the server refuses.
  grpc::Status RawHealth(std::shared_ptr<grpc::ChannelCredentials> credentials) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto stub = v1::SessionStore::NewStub(grpc::CreateCustomChannel(address_, credentials, args));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::HealthResponse response;
    return stub->Health(&ctx, v1::HealthRequest(), &response);
  }

  static Certs* certs_;
  testing::TempDir dir_{"sinew-mtls-store"};
  std::unique_ptr<testing::Subprocess> server_;
  std::string address_;
};
Certs* StoreMtlsTest::certs_ = nullptr;

TEST_F(StoreMtlsTest, ClientWithTheRightCaAndCertificateTalks) {
  auto store = Connect(certs_->Client("ca1", "ca1"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto meta = (*store)->CreateSession(test::CreateOf("acme", "over mTLS"));
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  auto again = (*store)->GetSession(meta->id());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->title(), "over mTLS");
}

TEST_F(StoreMtlsTest, ClientWithoutACertificateIsRefused) {
  grpc::SslCredentialsOptions no_identity;
  no_identity.pem_root_certs = ReadAll(certs_->File("ca1", "ca.pem"));
  grpc::Status refused = RawHealth(grpc::SslCredentials(no_identity));
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();

  // The same channel type with the client's certificate added is served.
  grpc::SslCredentialsOptions with_identity = no_identity;
  with_identity.pem_cert_chain = ReadAll(certs_->File("ca1", "harness.pem"));
  with_identity.pem_private_key = ReadAll(certs_->File("ca1", "harness-key.pem"));
  grpc::Status served = RawHealth(grpc::SslCredentials(with_identity));
  EXPECT_TRUE(served.ok()) << served.error_message();
}

TEST_F(StoreMtlsTest, ClientTrustingAnotherCaIsRefused) {
  // Its own certificate is fine, but it does not trust the server's CA.
  auto store = Connect(certs_->Client("ca1", "ca2"));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable) << store.status().ToString();
}

TEST_F(StoreMtlsTest, ClientCertificateFromAnotherCaIsRefused) {
  // It trusts the server, but its certificate is signed by a CA the server does not know.
  auto store = Connect(certs_->Client("ca2", "ca1"));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable) << store.status().ToString();
}

TEST_F(StoreMtlsTest, WrongServerNameIsRefused) {
  GrpcTlsOptions tls = certs_->Client("ca1", "ca1");
  tls.server_name_override = "not-the-store.example";
  auto wrong = Connect(tls);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kUnavailable) << wrong.status().ToString();

  tls.server_name_override = "store";  // the name its certificate carries
  auto right = Connect(tls);
  EXPECT_TRUE(right.ok()) << right.status().ToString();
}

TEST_F(StoreMtlsTest, PlaintextClientIsRefused) {
  grpc::Status refused = RawHealth(grpc::InsecureChannelCredentials());
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  auto store = Connect(GrpcTlsOptions{});
  EXPECT_FALSE(store.ok());
}

TEST_F(StoreMtlsTest, NewCertificatesAreUsedWithoutARestart) {
  auto before = Connect(certs_->Client("ca1", "ca1"));
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  auto created = (*before)->CreateSession(test::CreateOf("acme", "before"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();

  // The operator moves the server to a new CA: new certificate, key and CA files.
  InstallServerFiles("ca2");
  // The server checks its files every second; wait (bounded) until a client of the new
  // CA is served.
  Result<std::unique_ptr<SessionStore>> after = Status::Unavailable("not tried");
  for (int attempt = 0; attempt < 60 && !after.ok(); ++attempt) {
    after = Connect(certs_->Client("ca2", "ca2"), 1s);
  }
  ASSERT_TRUE(after.ok()) << "the server never presented the new certificates: " << after.status().ToString();
  EXPECT_TRUE((*after)->GetSession(created->id()).ok());

  // New connections of the old CA's clients are refused now; the connection opened
  // before the change keeps working.
  auto old_client = Connect(certs_->Client("ca1", "ca1"));
  EXPECT_FALSE(old_client.ok());
  EXPECT_TRUE((*before)->GetSession(created->id()).ok());
}

TEST_F(StoreMtlsTest, StopsCleanlyOnSigterm) {
  // gRPC's threads start after the stop signals are blocked, so SIGTERM reaches the
  // orderly shutdown instead of killing the process.
  server_->Signal(SIGTERM);
  const int status = server_->Wait();
  EXPECT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
}

TEST_F(StoreMtlsTest, BadCertificateFilesStopTheStartWithTheirName) {
  std::vector<std::string> args = ServerArgs();
  args[args.size() - 7] = dir_.Sub("missing.pem");  // --tls-cert
  testing::RunResult missing = testing::RunToEnd(args);
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find(dir_.Sub("missing.pem")), std::string::npos) << missing.output;

  args = ServerArgs();
  args[args.size() - 5] = certs_->File("ca1", "harness-key.pem");  // --tls-key of another certificate
  testing::RunResult mismatched = testing::RunToEnd(args);
  EXPECT_EQ(mismatched.exit_code, 2) << mismatched.output;
  EXPECT_NE(mismatched.output.find("does not match"), std::string::npos) << mismatched.output;

  args = ServerArgs();
  args[args.size() - 3] = dir_.Sub("store-key.pem");  // --tls-ca that holds a key, not a certificate
  testing::RunResult not_a_ca = testing::RunToEnd(args);
  EXPECT_EQ(not_a_ca.exit_code, 2) << not_a_ca.output;
  EXPECT_NE(not_a_ca.output.find("holds no PEM certificate"), std::string::npos) << not_a_ca.output;

  testing::RunResult half = testing::RunToEnd({testing::BinaryPath("sinew-store"), "--db", dir_.Sub("db2"),
                                               "--listen", "127.0.0.1:0", "--tls-cert", dir_.Sub("store.pem")});
  EXPECT_EQ(half.exit_code, 2) << half.output;
  EXPECT_NE(half.output.find("together"), std::string::npos) << half.output;
}

TEST(StorePlainGrpcTest, PlainOnlyOnLoopbackUnlessInsecure) {
  testing::TempDir dir;
  testing::RunResult refused = testing::RunToEnd(
      {testing::BinaryPath("sinew-store"), "--db", dir.Sub("db"), "--listen", "0.0.0.0:0"});
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("--insecure"), std::string::npos) << refused.output;

  testing::Subprocess insecure({testing::BinaryPath("sinew-store"), "--db", dir.Sub("db"), "--listen",
                                "0.0.0.0:0", "--insecure"});
  EXPECT_TRUE(insecure.WaitForLine("listening on", 20s));
}

}  // namespace
}  // namespace sinew::store
