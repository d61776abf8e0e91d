// The client library against a real sinew-sandbox-agent process on the host (no
// container): the gRPC layer, streaming, tool listing, and transport errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "sinew/sandbox/outcome.h"
#include "sinew/sandbox/provisioner_client.h"
#include "sinew/sandbox/sandbox_client.h"

extern char** environ;

namespace sinew::sandbox {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class AgentProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sinew-agent-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "ws");
    const char* bin = std::getenv("SINEW_BIN_DIR");
    std::string agent = std::string(bin != nullptr ? bin : "build/bin") + "/sinew-sandbox-agent";
    std::vector<std::string> args = {agent,
                                     "--socket",
                                     (dir_ / "agent.sock").string(),
                                     "--workspace",
                                     (dir_ / "ws").string(),
                                     "--max-output-bytes",
                                     "100"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ASSERT_EQ(posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ), 0);
    // Wait for the socket: a channel whose first attempt fails backs off for a second.
    for (int i = 0; i < 500 && !fs::exists(dir_ / "agent.sock"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    auto client = SandboxClient::Connect("unix://" + (dir_ / "agent.sock").string());
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }
  void TearDown() override {
    client_.reset();
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "agent exit status " << status;
    }
    fs::remove_all(dir_);
  }

  fs::path dir_;
  pid_t pid_ = -1;
  std::unique_ptr<SandboxClient> client_;
};

TEST_F(AgentProcessTest, ExecuteListToolsAndStream) {
  auto tools = client_->ListTools();
  ASSERT_TRUE(tools.ok());
  ASSERT_EQ(tools->size(), 6u);
  EXPECT_EQ((*tools)[0].name(), "bash");
  EXPECT_FALSE((*tools)[0].idempotent());
  EXPECT_THAT((*tools)[0].input_schema_json(), HasSubstr("\"command\""));

  auto r = client_->Execute("write_file", R"({"path":"a.txt","content":"x"})");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->is_error()) << r->output();
  EXPECT_TRUE(fs::exists(dir_ / "ws" / "a.txt"));

  auto big = client_->Execute("bash", R"({"command":"seq 1 1000"})");
  ASSERT_TRUE(big.ok());
  EXPECT_TRUE(big->truncated());
  EXPECT_THAT(big->output(), HasSubstr("bytes truncated"));

  std::string out, err;
  auto s =
      client_->ExecuteStream("bash", R"({"command":"echo o; echo e >&2; exit 4"})",
                             [&](bool is_err, std::string_view b) { (is_err ? err : out) += b; });
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(out, "o\n");
  EXPECT_EQ(err, "e\n");
  EXPECT_EQ(s->exit_code(), 4);
  EXPECT_TRUE(s->is_error());

  auto bad = client_->Execute("no_such_tool", "{}");
  ASSERT_TRUE(bad.ok());  // a tool error, not a transport error
  EXPECT_TRUE(bad->is_error());
  auto garbage = client_->Execute("bash", std::string("\xff\xfe{", 3));
  ASSERT_TRUE(garbage.ok());
  EXPECT_TRUE(garbage->is_error());
  EXPECT_THAT(garbage->output(), HasSubstr("not valid UTF-8"));
  auto not_json = client_->Execute("bash", "{nope");
  ASSERT_TRUE(not_json.ok());
  EXPECT_THAT(not_json->output(), HasSubstr("not valid JSON"));
}

TEST(ClientTest, UnreachableEndpointsAreUnavailable) {
  SandboxClientOptions options;
  options.connect_timeout = std::chrono::milliseconds(200);
  auto c = SandboxClient::Connect("unix:///nonexistent/agent.sock", options);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(SandboxClient::Connect("").status().code(), StatusCode::kInvalidArgument);

  auto p = ProvisionerClient::Connect("127.0.0.1:1", std::chrono::milliseconds(500));
  ASSERT_TRUE(p.ok());
  auto h = (*p)->Health();
  ASSERT_FALSE(h.ok());
  EXPECT_TRUE(h.status().code() == StatusCode::kUnavailable ||
              h.status().code() == StatusCode::kDeadlineExceeded)
      << h.status().ToString();
}

TEST(OutcomeTest, NamesMatchTheSessionLogAndInfrastructureErrors) {
  EXPECT_EQ(OutcomeName(v1::SANDBOX_OUTCOME_OOM), "oom");
  EXPECT_EQ(OutcomeName(v1::SANDBOX_OUTCOME_LOST), "crashed");
  EXPECT_EQ(OutcomeName(v1::SANDBOX_OUTCOME_UNSPECIFIED), "running");
  EXPECT_TRUE(IsInfrastructureError(v1::SANDBOX_OUTCOME_LIFETIME));
  EXPECT_FALSE(IsInfrastructureError(v1::SANDBOX_OUTCOME_EXITED));
  EXPECT_FALSE(IsInfrastructureError(v1::SANDBOX_OUTCOME_DESTROYED));
}

}  // namespace
}  // namespace sinew::sandbox
