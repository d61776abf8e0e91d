// In-process tests of CallRegistry::Cancel (an interrupt of a call with an id): a running
// bash is stopped and its one result says so, to every caller of the id; an id cancelled
// before its call came stops that call as it starts; a finished call keeps its result.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <future>

#include "agent/call_registry.h"
#include "agent/tools.h"

namespace sinew::sandbox {
namespace {

namespace fs = std::filesystem;

class CallRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sinew-calls-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    config_.workspace = root_ / "ws";
    fs::create_directories(config_.workspace);
    tools_ = std::make_unique<ToolRegistry>(config_);
    calls_ = std::make_unique<CallRegistry>(*tools_);
  }
  void TearDown() override { fs::remove_all(root_); }

  Result<v1::ExecuteResult> Run(const std::string& id, const std::string& input,
                                const ChunkSink& sink = nullptr) {
    return calls_->Run(id, "bash", input, sink, nullptr);
  }

  fs::path root_;
  ToolConfig config_;
  std::unique_ptr<ToolRegistry> tools_;
  std::unique_ptr<CallRegistry> calls_;
};

TEST_F(CallRegistryTest, CancelStopsARunningBashAndItsResultSaysSo) {
  const std::string input = R"({"command":"echo started; sleep 1000","timeout":3600})";
  std::promise<void> started;
  bool told = false;
  auto sink = [&](bool, std::string_view) {
    if (!told) started.set_value();
    told = true;
  };
  auto running = std::async(std::launch::async, [&] { return Run("c1", input, sink); });
  started.get_future().wait();  // its output came: the command runs
  EXPECT_TRUE(calls_->Cancel("c1"));
  auto r = running.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->is_error());
  EXPECT_EQ(r->signal(), SIGKILL);
  EXPECT_NE(r->output().find("process group was killed"), std::string::npos) << r->output();
  // Asked again (a harness that took over): the same result, not a second run.
  auto again = Run("c1", input);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->replayed());
  EXPECT_EQ(again->output(), r->output());
  EXPECT_FALSE(calls_->Cancel("c1")) << "a finished call is not running";
}

TEST_F(CallRegistryTest, AnIdCancelledBeforeItsCallCameStopsTheCallAsItStarts) {
  EXPECT_FALSE(calls_->Cancel("early"));
  auto r = Run("early", R"({"command":"sleep 1000","timeout":3600})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->signal(), SIGKILL);
  EXPECT_NE(r->output().find("process group was killed"), std::string::npos) << r->output();
  // Only that call: another id runs to its end.
  auto other = Run("other", R"({"command":"echo fine"})");
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->is_error()) << other->output();
  EXPECT_EQ(other->output(), "fine\n");
}

}  // namespace
}  // namespace sinew::sandbox
