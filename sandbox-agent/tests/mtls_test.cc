// mTLS on sandboxd's gRPC link: a real sinew-sandboxd (root, runc) serving with
// certificates made by scripts/make-certs.sh; clients with the right identity are
// served, every other one refused. The in-sandbox agent stays on its unix socket.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sandboxd_process.h"
#include "sinew/proto/sandbox.grpc.pb.h"
#include "sinew/testing/certs.h"
#include "sinew/testing/subprocess.h"

namespace sinew::sandbox::testing {
namespace {

using namespace std::chrono_literals;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class SandboxdMtlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new sinew::testing::TempDir("sinew-mtls-sandboxd");
    sinew::testing::MakeCerts(dir_->Sub("ca1"), {"sandboxd", "harness"});
    sinew::testing::MakeCerts(dir_->Sub("ca2"), {"sandboxd", "harness"});
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string File(const std::string& ca, const std::string& name) { return dir_->Sub(ca + "/" + name); }
  static std::vector<std::string> ServerFlags() {
    return {"--warm-pool-size", "0", "--tls-cert", File("ca1", "sandboxd.pem"), "--tls-key",
            File("ca1", "sandboxd-key.pem"), "--tls-ca", File("ca1", "ca.pem")};
  }
  static GrpcTlsOptions Client(const std::string& identity_ca, const std::string& trusted_ca) {
    GrpcTlsOptions tls;
    tls.cert_file = File(identity_ca, "harness.pem");
    tls.key_file = File(identity_ca, "harness-key.pem");
    tls.ca_file = File(trusted_ca, "ca.pem");
    return tls;
  }
  void SetUp() override { daemon_.Start(ServerFlags(), Client("ca1", "ca1")); }
  std::string Address() const { return "127.0.0.1:" + std::to_string(daemon_.port()); }
  Status HealthWith(const GrpcTlsOptions& tls) {
    auto client = ProvisionerClient::Connect(Address(), 10s, tls);
    if (!client.ok()) return client.status();
    return (*client)->Health().status();
  }

  static sinew::testing::TempDir* dir_;
  SandboxdProcess daemon_;
};
sinew::testing::TempDir* SandboxdMtlsTest::dir_ = nullptr;

TEST_F(SandboxdMtlsTest, ClientWithTheRightCertificateProvisionsAndRunsTools) {
  auto box = daemon_.client().Provision(SmallResources(), "mtls");
  ASSERT_TRUE(box.ok()) << box.status().ToString();
  auto tools = SandboxClient::ConnectTo(*box);  // the agent's unix socket, as before
  ASSERT_TRUE(tools.ok()) << tools.status().ToString();
  EXPECT_NE(Bash(**tools, "echo over-mtls").output().find("over-mtls"), std::string::npos);
  EXPECT_TRUE(daemon_.client().Destroy(box->id()).ok());
}

TEST_F(SandboxdMtlsTest, ClientWithoutACertificateIsRefused) {
  grpc::SslCredentialsOptions no_identity;
  no_identity.pem_root_certs = ReadAll(File("ca1", "ca.pem"));
  auto stub = v1::Provisioner::NewStub(grpc::CreateChannel(Address(), grpc::SslCredentials(no_identity)));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  v1::ProvisionerHealthResponse response;
  grpc::Status refused = stub->Health(&ctx, v1::ProvisionerHealthRequest(), &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
}

TEST_F(SandboxdMtlsTest, ClientTrustingAnotherCaIsRefused) {
  Status refused = HealthWith(Client("ca1", "ca2"));
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.ToString();
}

TEST_F(SandboxdMtlsTest, ClientCertificateFromAnotherCaIsRefused) {
  Status refused = HealthWith(Client("ca2", "ca1"));
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.ToString();
}

TEST_F(SandboxdMtlsTest, WrongServerNameIsRefused) {
  GrpcTlsOptions tls = Client("ca1", "ca1");
  tls.server_name_override = "not-sandboxd.example";
  Status refused = HealthWith(tls);
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.ToString();
  tls.server_name_override = "sandboxd";
  EXPECT_TRUE(HealthWith(tls).ok());
}

TEST_F(SandboxdMtlsTest, PlaintextClientIsRefused) {
  Status refused = HealthWith(GrpcTlsOptions{});
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.ToString();
}

TEST(SandboxdTlsFilesTest, BadFilesStopTheStartWithTheirName) {
  sinew::testing::TempDir dir("sinew-mtls-files");
  sinew::testing::MakeCerts(dir.path(), {"sandboxd"});
  const std::string daemon = SandboxdProcess::BinDir() + "/sinew-sandboxd";
  auto run = [&](const std::string& cert, const std::string& key) {
    return sinew::testing::RunToEnd({daemon, "--listen", "127.0.0.1:0", "--state-dir", dir.Sub("state"),
                                     "--tls-cert", cert, "--tls-key", key, "--tls-ca", dir.Sub("ca.pem")});
  };
  auto missing = run(dir.Sub("nope.pem"), dir.Sub("sandboxd-key.pem"));
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find(dir.Sub("nope.pem")), std::string::npos) << missing.output;
  auto mismatched = run(dir.Sub("sandboxd.pem"), dir.Sub("ca-key.pem"));
  EXPECT_EQ(mismatched.exit_code, 2) << mismatched.output;
  EXPECT_NE(mismatched.output.find("does not match"), std::string::npos) << mismatched.output;
  auto plain = sinew::testing::RunToEnd({daemon, "--listen", "0.0.0.0:0", "--state-dir", dir.Sub("state")});
  EXPECT_EQ(plain.exit_code, 2) << plain.output;
  EXPECT_NE(plain.output.find("--insecure"), std::string::npos) << plain.output;
}

TEST(SandboxdTlsFilesTest, StopsCleanlyOnSigtermWithMtls) {
  sinew::testing::TempDir dir("sinew-mtls-stop");
  sinew::testing::MakeCerts(dir.path(), {"sandboxd"});
  const std::string state = "/run/sinew-mtls-stop-" + std::to_string(getpid());
  sinew::testing::Subprocess daemon({SandboxdProcess::BinDir() + "/sinew-sandboxd", "--listen", "127.0.0.1:0",
                                     "--state-dir", state, "--cgroup-parent", "sinew-mtls-stop-" + std::to_string(getpid()),
                                     "--warm-pool-size", "0", "--tls-cert", dir.Sub("sandboxd.pem"), "--tls-key",
                                     dir.Sub("sandboxd-key.pem"), "--tls-ca", dir.Sub("ca.pem")});
  ASSERT_TRUE(daemon.WaitForLine("listening", 60s));
  // gRPC's threads start after the stop signals are blocked: SIGTERM reaches the orderly
  // shutdown, which unmounts the agent directory.
  daemon.Signal(SIGTERM);
  const int status = daemon.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "wait status " << status;
  std::ifstream mounts("/proc/self/mounts");
  std::stringstream text;
  text << mounts.rdbuf();
  EXPECT_EQ(text.str().find(state), std::string::npos) << "a mount below " << state << " is left";
  std::error_code ec;
  std::filesystem::remove_all(state, ec);
  rmdir(("/sys/fs/cgroup/sinew-mtls-stop-" + std::to_string(getpid())).c_str());
}

}  // namespace
}  // namespace sinew::sandbox::testing
