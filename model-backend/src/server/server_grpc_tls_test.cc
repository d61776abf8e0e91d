// mTLS on sinew-model's gRPC port: the real process with certificates made by
// scripts/make-certs.sh; --tls-cert/--tls-key serve HTTPS and gRPC, --tls-ca is the CA
// gRPC clients' certificates must chain to.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "server_test_util.h"
#include "sinew/grpc_tls.h"
#include "sinew/proto/model.grpc.pb.h"
#include "sinew/testing/certs.h"
#include "sinew/testing/subprocess.h"

namespace sinew::model {
namespace {

using testing::ServerProcess;

class ServerGrpcTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new sinew::testing::TempDir("sinew-model-mtls");
    sinew::testing::MakeCerts(dir_->Sub("ca1"), {"model", "client"});
    sinew::testing::MakeCerts(dir_->Sub("ca2"), {"client"});
    std::string error;
    server_ = ServerProcess::Start({"--tls-cert", File("ca1", "model.pem"), "--tls-key", File("ca1", "model-key.pem"),
                                    "--tls-ca", File("ca1", "ca.pem")},
                                   &error)
                  .release();
    ASSERT_NE(server_, nullptr) << error;
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  static std::string File(const std::string& ca, const std::string& name) { return dir_->Sub(ca + "/" + name); }

  // One short Generate over a fresh channel with `tls`.
  grpc::Status Generate(const GrpcTlsOptions& tls) {
    auto channel = GrpcChannel("127.0.0.1:" + std::to_string(server_->grpc_port()), tls);
    EXPECT_TRUE(channel.ok()) << channel.status().ToString();
    if (!channel.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, "no channel");
    auto stub = sinew::v1::ModelService::NewStub(*channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(2));
    sinew::v1::GenerateRequest request;
    request.set_prompt("Once upon a time");
    request.set_max_tokens(4);
    request.set_temperature(0);
    auto reader = stub->Generate(&context, request);
    int messages = 0;
    for (sinew::v1::GenerateResponse message; reader->Read(&message);) ++messages;
    grpc::Status status = reader->Finish();
    if (status.ok()) {
      EXPECT_GT(messages, 0);
    }
    return status;
  }
  static GrpcTlsOptions Client(const std::string& ca) {
    GrpcTlsOptions tls;
    tls.cert_file = File(ca, "client.pem");
    tls.key_file = File(ca, "client-key.pem");
    tls.ca_file = File("ca1", "ca.pem");
    return tls;
  }

  static sinew::testing::TempDir* dir_;
  static ServerProcess* server_;
};
sinew::testing::TempDir* ServerGrpcTlsTest::dir_ = nullptr;
ServerProcess* ServerGrpcTlsTest::server_ = nullptr;

TEST_F(ServerGrpcTlsTest, ClientWithACertificateOfTheCaGenerates) {
  grpc::Status status = Generate(Client("ca1"));
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(ServerGrpcTlsTest, OtherClientsAreRefused) {
  EXPECT_EQ(Generate(Client("ca2")).error_code(), grpc::StatusCode::UNAVAILABLE) << "certificate of another CA";
  EXPECT_EQ(Generate(GrpcTlsOptions{}).error_code(), grpc::StatusCode::UNAVAILABLE) << "plaintext";
  GrpcTlsOptions wrong_name = Client("ca1");
  wrong_name.server_name_override = "not-the-model.example";
  EXPECT_EQ(Generate(wrong_name).error_code(), grpc::StatusCode::UNAVAILABLE) << "wrong server name";
}

TEST(ServerGrpcTlsStartup, TlsWithGrpcNeedsTheClientCa) {
  sinew::testing::TempDir dir("sinew-model-mtls-start");
  sinew::testing::MakeCerts(dir.path(), {"model"});
  std::string output;
  EXPECT_EQ(testing::RunServerToExit({"--model", testing::StoriesPath(), "--port", "0", "--grpc-port", "0",
                                      "--tls-cert", dir.Sub("model.pem"), "--tls-key", dir.Sub("model-key.pem")},
                                     &output),
            2);
  EXPECT_NE(output.find("--tls-ca"), std::string::npos) << output;
  output.clear();
  EXPECT_EQ(testing::RunServerToExit({"--model", testing::StoriesPath(), "--port", "0", "--grpc-port", "0",
                                      "--tls-cert", dir.Sub("model.pem"), "--tls-key", dir.Sub("model-key.pem"),
                                      "--tls-ca", dir.Sub("missing-ca.pem")},
                                     &output),
            2);
  EXPECT_NE(output.find(dir.Sub("missing-ca.pem")), std::string::npos) << output;
}

}  // namespace
}  // namespace sinew::model
