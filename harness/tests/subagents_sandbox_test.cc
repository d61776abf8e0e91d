// Sub-agents with `sandbox: "fork"` (docs/harness.md, "Sub-agents") in real runc
// sandboxes: sinew-store, sinew-sandboxd and sinew-harness as processes, scripted models
// (test doubles of language models). The child starts in a copy of its parent's sandbox:
// it sees the parent's files, what it writes stays in its copy, and the snapshot it was
// restored from is deleted when it ends.
#include <gtest/gtest.h>

#include "sinew/sandbox/provisioner_client.h"
#include "test_util.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;
constexpr const char* kKey = "fork-key";

class SubagentForkTest : public StoreAndSandboxdTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StoreAndSandboxdTest::SetUp());
    // The parent writes a file, forks a child into a copy of its sandbox, then looks at
    // its own workspace again.
    Script("parent", R"({"responses": [
      {"text": "Writing.", "tool_calls": [{"name": "bash", "input": {"command": "echo forty-two > /workspace/note.txt"}}]},
      {"text": "Forking.", "tool_calls": [{"name": "delegate", "input": {"task": "read the note", "model": "reader", "sandbox": "fork"}}]},
      {"text": "Looking.", "tool_calls": [{"name": "bash", "input": {"command": "ls /workspace"}}]},
      {"text": "Parent done."}]})");
    // The child reads the parent's file and leaves one of its own.
    Script("reader", R"({"responses": [
      {"text": "Reading.", "tool_calls": [{"name": "bash", "input": {"command": "cat /workspace/note.txt && echo child-was-here > /workspace/child.txt"}}]},
      {"text": "The note is read."}]})");
    // A parent that forks before it has a sandbox: its child gets a fresh one.
    Script("early", R"({"responses": [
      {"text": "Forking.", "tool_calls": [{"name": "delegate", "input": {"task": "look", "model": "looker", "sandbox": "fork"}}]},
      {"text": "Early done."}]})");
    Script("looker", R"({"responses": [
      {"text": "Looking.", "tool_calls": [{"name": "bash", "input": {"command": "ls -A /workspace | wc -l"}}]},
      {"text": "Looked."}]})");
    harness_ = std::make_unique<HarnessProcess>(dir_.Sub("harness.json"), Config());
    ASSERT_FALSE(harness_->address.empty());
    base_ = harness_->url();
  }

  void Script(const std::string& name, const std::string& text) {
    AddScriptedModel(name, dir_.Sub(name + ".json"), text, &models_);
  }

  std::string Config() const {
    return R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store_->address + R"("},
      "sandboxd": {"address": ")" + sandboxd_->address + R"("},
      "api_keys": {")" + std::string(kKey) + R"(": "t"},
      "default_model": "parent", "models": {)" + models_ + R"(},
      "lease_ttl_ms": 2000, "scan_interval_ms": 300})";
  }

  std::string Submit(const std::string& model) {
    auto r = Api("POST", base_ + "/v1/sessions", kKey,
                 R"({"prompt": "go", "model": ")" + model + R"(", "delegate": {"enabled": true}})");
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? std::string(r.json.at("session").at("id").as_string()) : "";
  }

  // The outputs of a session's tool results, in order.
  std::vector<std::string> Outputs(const std::string& id) {
    std::vector<std::string> out;
    for (const auto& r : OfType(AllEvents(base_, kKey, id), "tool_result")) out.push_back(Str(r, "output"));
    return out;
  }

  std::string ChildOf(const std::string& id) {
    for (const auto& c : OfType(AllEvents(base_, kKey, id), "tool_call")) {
      if (Str(c, "tool_name") == "delegate") return Str(c, "child_session_id");
    }
    return "";
  }

  // The snapshots sinew-sandboxd keeps for sessions' sandboxes (owner "").
  int Snapshots() const {
    auto prov = sandbox::ProvisionerClient::Connect(sandboxd_->address);
    if (!prov.ok()) return -1;
    auto listed = (*prov)->ListSnapshots("");
    return listed.ok() ? listed->snapshots_size() : -1;
  }

  std::string models_;
  std::unique_ptr<HarnessProcess> harness_;
  std::string base_;
};

TEST_F(SubagentForkTest, AForkedChildSeesItsParentsFilesAndWritesOnlyToItsCopy) {
  const std::string id = Submit("parent");
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(WaitForStatus(base_, kKey, id, "completed,failed,cancelled", 240), "completed");
  const std::string child = ChildOf(id);
  ASSERT_FALSE(child.empty());
  EXPECT_EQ(WaitForStatus(base_, kKey, child, "completed,failed,cancelled", 60), "completed");

  const auto child_outputs = Outputs(child);
  ASSERT_EQ(child_outputs.size(), 1u);
  EXPECT_NE(child_outputs[0].find("forty-two"), std::string::npos) << "the child read the parent's file: "
                                                                   << child_outputs[0];
  const auto outputs = Outputs(id);
  ASSERT_EQ(outputs.size(), 3u);
  EXPECT_EQ(outputs[1], "The note is read.") << "the child's answer is the delegate call's result";
  EXPECT_NE(outputs[2].find("note.txt"), std::string::npos) << outputs[2];
  EXPECT_EQ(outputs[2].find("child.txt"), std::string::npos)
      << "the child wrote into its copy, not into its parent's sandbox: " << outputs[2];

  // Two sandboxes: the parent's and the child's own.
  auto parent_boxes = OfType(AllEvents(base_, kKey, id), "sandbox_provisioned");
  auto child_boxes = OfType(AllEvents(base_, kKey, child), "sandbox_provisioned");
  ASSERT_EQ(parent_boxes.size(), 1u);
  ASSERT_EQ(child_boxes.size(), 1u);
  EXPECT_NE(Str(parent_boxes[0], "sandbox_id"), Str(child_boxes[0], "sandbox_id"));
  EXPECT_EQ(Snapshots(), 0) << "the child deleted the snapshot it was restored from when it ended";
}

TEST_F(SubagentForkTest, AForkBeforeTheParentHasASandboxGivesTheChildAFreshOne) {
  const std::string id = Submit("early");
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(WaitForStatus(base_, kKey, id, "completed,failed,cancelled", 240), "completed");
  const std::string child = ChildOf(id);
  ASSERT_FALSE(child.empty());
  const auto child_outputs = Outputs(child);
  ASSERT_EQ(child_outputs.size(), 1u);
  EXPECT_EQ(child_outputs[0].substr(0, child_outputs[0].find_first_of(" \n")), "0")
      << "an empty workspace: " << child_outputs[0];
  EXPECT_TRUE(OfType(AllEvents(base_, kKey, id), "sandbox_provisioned").empty());
  EXPECT_EQ(Snapshots(), 0);
}

}  // namespace
}  // namespace sinew::harness::test
