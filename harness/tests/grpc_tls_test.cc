// The harness's side of mTLS on the gRPC links: config.grpc_tls is parsed and checked,
// and a real sinew-harness drives a session through a real sinew-store that requires
// client certificates (certificates made by scripts/make-certs.sh).
#include <gtest/gtest.h>

#include <fstream>

#include "sinew/harness/config.h"
#include "sinew/testing/certs.h"
#include "test_util.h"

namespace sinew::harness {
namespace {

using namespace std::chrono_literals;

std::string ConfigWith(const std::string& grpc_tls) {
  return R"({"store": {"address": "127.0.0.1:1"}, "api_keys": {"k": "t"},
             "models": {"m": {"kind": "scripted", "script": "/dev/null"}}, "grpc_tls": )" +
         grpc_tls + "}";
}

TEST(GrpcTlsConfigTest, ReadsTheBlockAndRefusesAnIncompleteOne) {
  auto c = ParseConfig(ConfigWith(R"({"cert_file": "h.pem", "key_file": "h-key.pem", "ca_file": "ca.pem",
                                      "server_name": "store", "refresh_seconds": 5})"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->grpc_tls.cert_file, "h.pem");
  EXPECT_EQ(c->grpc_tls.key_file, "h-key.pem");
  EXPECT_EQ(c->grpc_tls.ca_file, "ca.pem");
  EXPECT_EQ(c->grpc_tls.server_name_override, "store");
  EXPECT_EQ(c->grpc_tls.refresh_interval, 5s);

  auto no_ca = ParseConfig(ConfigWith(R"({"cert_file": "h.pem", "key_file": "h-key.pem"})"));
  ASSERT_FALSE(no_ca.ok());
  EXPECT_NE(no_ca.status().message().find("config.grpc_tls needs cert_file, key_file and ca_file"), std::string::npos);
  auto unknown = ParseConfig(ConfigWith(R"({"cert": "h.pem"})"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("cert"), std::string::npos) << unknown.status().ToString();
  auto zero = ParseConfig(ConfigWith(R"({"cert_file": "a", "key_file": "b", "ca_file": "c", "refresh_seconds": 0})"));
  EXPECT_FALSE(zero.ok());
  EXPECT_FALSE(ParseConfig(ConfigWith(R"("yes")")).ok());
}

// config.etcd_tls: the same block, for the etcd links (store.etcd, sandboxd.etcd).
TEST(GrpcTlsConfigTest, EtcdTlsIsReadForAnEtcdAndRefusedWithoutOne) {
  const std::string block = R"({"cert_file": "h.pem", "key_file": "h-key.pem", "ca_file": "etcd-ca.pem",
                                 "server_name": "etcd"})";
  auto c = ParseConfig(R"({"store": {"etcd": "127.0.0.1:2379"}, "api_keys": {"k": "t"},
      "models": {"m": {"kind": "scripted", "script": "/dev/null"}}, "etcd_tls": )" + block + "}");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->etcd_tls.ca_file, "etcd-ca.pem");
  EXPECT_EQ(c->etcd_tls.server_name_override, "etcd");
  EXPECT_FALSE(c->grpc_tls.enabled());

  auto no_etcd = ParseConfig(R"({"store": {"address": "127.0.0.1:1"}, "api_keys": {"k": "t"},
      "models": {"m": {"kind": "scripted", "script": "/dev/null"}}, "etcd_tls": )" + block + "}");
  ASSERT_FALSE(no_etcd.ok());
  EXPECT_NE(no_etcd.status().message().find("no etcd is configured"), std::string::npos) << no_etcd.status().ToString();
  auto partial = ParseConfig(R"({"sandboxd": {"etcd": "127.0.0.1:2379"}, "store": {"address": "127.0.0.1:1"},
      "api_keys": {"k": "t"}, "models": {"m": {"kind": "scripted", "script": "/dev/null"}},
      "etcd_tls": {"ca_file": "etcd-ca.pem"}})");
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.status().message().find("config.etcd_tls needs cert_file, key_file and ca_file"),
            std::string::npos)
      << partial.status().ToString();
}

TEST(GrpcTlsConfigTest, LoadConfigNamesAnUnreadableFile) {
  testing::TempDir dir;
  testing::MakeCerts(dir.path(), {"harness"});
  const std::string path = dir.Sub("harness.json");
  std::ofstream(path) << ConfigWith(R"({"cert_file": ")" + dir.Sub("harness.pem") + R"(", "key_file": ")" +
                                    dir.Sub("harness-key.pem") + R"(", "ca_file": ")" + dir.Sub("missing-ca.pem") +
                                    R"("})");
  auto c = LoadConfig(path);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(dir.Sub("missing-ca.pem")), std::string::npos) << c.status().ToString();
}

TEST(GrpcTlsHarnessTest, DrivesASessionThroughAnMtlsStore) {
  testing::TempDir dir;
  testing::MakeCerts(dir.Sub("certs"), {"store", "harness"});
  const std::string certs = dir.Sub("certs");
  testing::Subprocess store({testing::BinaryPath("sinew-store"), "--db", dir.Sub("db"), "--listen", "127.0.0.1:0",
                             "--tls-cert", certs + "/store.pem", "--tls-key", certs + "/store-key.pem", "--tls-ca",
                             certs + "/ca.pem"});
  auto line = store.WaitForLine("listening on", 20s);
  ASSERT_TRUE(line) << "sinew-store did not start";
  const std::string store_address = line->substr(line->rfind(' ') + 1);

  std::ofstream(dir.Sub("script.json")) << R"({"responses": [{"text": "done"}]})";
  const std::string base = R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store_address +
                           R"("}, "api_keys": {"k": "t"}, "models": {"m": {"kind": "scripted", "script": ")" +
                           dir.Sub("script.json") + R"("}})";
  // Without a client certificate the harness cannot reach the store and does not start.
  test::HarnessProcess plain(dir.Sub("plain.json"), base + "}");
  EXPECT_TRUE(plain.address.empty());

  const std::string grpc_tls = R"(, "grpc_tls": {"cert_file": ")" + certs + R"(/harness.pem", "key_file": ")" + certs +
                               R"(/harness-key.pem", "ca_file": ")" + certs + R"(/ca.pem"}})";
  test::HarnessProcess harness(dir.Sub("mtls.json"), base + grpc_tls);
  ASSERT_FALSE(harness.address.empty()) << "sinew-harness did not start with config.grpc_tls";
  auto created = test::Api("POST", harness.url() + "/v1/sessions", "k", R"({"prompt": "hi", "model": "m"})");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id(created.json.at("session").at("id").as_string());
  EXPECT_EQ(test::WaitForStatus(harness.url(), "k", id, "completed"), "completed");
}

}  // namespace
}  // namespace sinew::harness
