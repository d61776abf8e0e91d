// The `sinew` CLI against a real sinew-store and sinew-harness on loopback, with
// scripted models (test doubles of language models, replaying JSON files).
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/json.hpp>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "cli_test_util.h"

namespace sinew::cli {
namespace {

using test::CliRun;
using test::RunSinew;

constexpr char kKey[] = "key-cli-test";

// A server process that prints "... listening on HOST:PORT" once it serves.
struct Server {
  Server(std::vector<std::string> argv, const std::string& needle) {
    proc = std::make_unique<testing::Subprocess>(argv);
    auto line = proc->WaitForLine(needle, std::chrono::seconds(30));
    if (line) address = line->substr(line->rfind(' ') + 1);
  }
  std::unique_ptr<testing::Subprocess> proc;
  std::string address;
};

class Platform {
 public:
  // A store and a harness on `port` (0: any) whose models are scripted.
  explicit Platform(const testing::TempDir& dir, const std::string& name, int port = 0)
      : dir_(dir), name_(name) {
    store_ = std::make_unique<Server>(
        std::vector<std::string>{testing::BinaryPath("sinew-store"), "--db", dir.Sub(name + "-db"),
                                 "--listen", "127.0.0.1:0"},
        "listening on");
    Write("answer.json", R"({"responses": [{"text": "Hello from the scripted model."}]})");
    // Each turn calls a tool that is not allowed, which the harness answers with a tool
    // error; the loop goes on until the script's last, tool-free response.
    Write("steps.json", R"({"responses": [
      {"text": "step one", "delay_ms": 150, "tool_calls": [{"name": "nope", "input": {"x": 1}}]},
      {"text": "step two", "delay_ms": 150, "tool_calls": [{"name": "nope", "input": {"x": 2}}]},
      {"text": "step three", "delay_ms": 150, "tool_calls": [{"name": "nope", "input": {"x": 3}}]},
      {"text": "all done", "delay_ms": 150}]})");
    Write("loop.json", R"({"loop": true, "responses": [
      {"text": "again", "tool_calls": [{"name": "nope", "input": {}}]}]})");
    Write("stuck.json", R"({"responses": [{"text": "thinking", "delay_ms": 60000}]})");
    Write("reads.json", R"({"responses": [
      {"text": "reading", "tool_calls": [{"name": "read_file", "input": {"path": "/etc/hostname"}}]},
      {"text": "read it"}]})");
    port_ = port;
    StartHarness();
  }

  void StartHarness() {
    std::string d = dir_.path() + "/" + name_ + "-";
    Write("harness.json", R"({"listen": "127.0.0.1:)" + std::to_string(port_) + R"(",
      "store": {"address": ")" + store_->address + R"("},
      "api_keys": {")" + std::string(kKey) + R"(": "cli-tenant"},
      "default_model": "answer",
      "models": {"answer": {"kind": "scripted", "script": ")" + d + R"(answer.json"},
                 "steps": {"kind": "scripted", "script": ")" + d + R"(steps.json"},
                 "loop": {"kind": "scripted", "script": ")" + d + R"(loop.json"},
                 "stuck": {"kind": "scripted", "script": ")" + d + R"(stuck.json"},
                 "reads": {"kind": "scripted", "script": ")" + d + R"(reads.json"}},
      "lease_ttl_ms": 1500, "scan_interval_ms": 300})");
    harness_ = std::make_unique<Server>(
        std::vector<std::string>{testing::BinaryPath("sinew-harness"), "--config", d + "harness.json"},
        "listening on");
    if (port_ == 0 && !harness_->address.empty()) {
      port_ = std::stoi(harness_->address.substr(harness_->address.rfind(':') + 1));
    }
  }

  void KillHarness() {
    harness_->proc->Signal(SIGKILL);
    harness_->proc->Wait();
  }

  bool up() const { return !store_->address.empty() && !harness_->address.empty(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  CliRun Sinew(std::vector<std::string> args, const std::string& in = "") const {
    args.insert(args.begin(), {"--server", url(), "--api-key", kKey});
    return RunSinew(args, in);
  }

 private:
  void Write(const std::string& file, const std::string& text) {
    std::ofstream(dir_.path() + "/" + name_ + "-" + file) << text;
  }
  const testing::TempDir& dir_;
  std::string name_;
  int port_ = 0;
  std::unique_ptr<Server> store_;
  std::unique_ptr<Server> harness_;
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// Replaces what changes from run to run (ids, times, durations) with placeholders.
std::string Normalize(std::string s, const std::string& id) {
  for (size_t p; (p = s.find(id)) != std::string::npos;) s.replace(p, id.size(), "<ID>");
  s = std::regex_replace(s, std::regex(R"(\+\d+\.\d{3}s)"), "+T");
  s = std::regex_replace(s, std::regex(R"(\d+\.\d{3}s)"), "Ts");
  s = std::regex_replace(s, std::regex(R"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)"), "<TIME>");
  s = std::regex_replace(s, std::regex(R"(call_[A-Za-z0-9_-]+)"), "<CALL>");
  s = std::regex_replace(s, std::regex(R"(driven by [^)]+)"), "driven by <HARNESS>");
  return s;
}

class CliRemoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    platform_ = std::make_unique<Platform>(dir_, "a");
    ASSERT_TRUE(platform_->up()) << "store or harness did not start";
  }
  std::string Detached(const std::string& model, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"run", "task for " + model, "--model", model, "--detach"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto run = platform_->Sinew(args);
    EXPECT_EQ(run.exit_code, 0) << run.out;
    return Lines(run.out).empty() ? "" : Lines(run.out).back();
  }
  testing::TempDir dir_;
  std::unique_ptr<Platform> platform_;
};

TEST_F(CliRemoteTest, RunFollowsUntilCompletedAndReplayRendersIt) {
  auto run = platform_->Sinew({"run", "Say hello", "--model", "steps"});
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("all done"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("running -> completed"), std::string::npos) << run.out;
  std::string id = run.out.substr(run.out.find("session ") + 8, 32);
  auto replay = platform_->Sinew({"replay", id});
  ASSERT_EQ(replay.exit_code, 0) << replay.out;
  EXPECT_GOLDEN("replay_steps.txt", Normalize(replay.out, id));
  // --step: enter, enter, then q stops after the third event.
  auto step = platform_->Sinew({"replay", id, "--step"}, "\n\nq\n");
  EXPECT_EQ(step.exit_code, 0);
  EXPECT_EQ(Lines(step.out).size(), 4u) << step.out;  // header + 3 events
  auto slice = platform_->Sinew({"replay", id, "--from", "3", "--to", "4"});
  EXPECT_EQ(Lines(slice.out).size(), 4u) << slice.out;  // header, #3, #4, summary
  EXPECT_EQ(Lines(slice.out)[1].rfind("#3 ", 0), 0u) << slice.out;
}

// Tool approvals (docs/harness.md): the waiting call is shown, `approve` answers it once,
// a second answer is refused, and replay shows the request and the decision.
TEST_F(CliRemoteTest, ApproveAndDenyAnswerAToolCallThatWaits) {
  std::string id = Detached("reads", {"--approvals", R"({"default": "ask"})"});
  ASSERT_FALSE(id.empty());
  std::string status;
  for (int i = 0; i < 600 && status != "requires_action"; ++i) {
    auto show = platform_->Sinew({"--json", "sessions", "show", id});
    if (show.exit_code == 0) status = std::string(boost::json::parse(Lines(show.out).at(0)).at("status").as_string());
    if (status != "requires_action") std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(status, "requires_action");
  auto show = platform_->Sinew({"sessions", "show", id});
  EXPECT_NE(show.out.find("waiting:  call_0_0 read_file"), std::string::npos) << show.out;
  auto unknown = platform_->Sinew({"deny", id, "call_7_7"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.out;
  auto approve = platform_->Sinew({"approve", id, "call_0_0"});
  EXPECT_EQ(approve.exit_code, 0) << approve.out;
  EXPECT_NE(approve.out.find("approved call_0_0"), std::string::npos) << approve.out;
  auto again = platform_->Sinew({"deny", id, "call_0_0", "--message", "changed my mind"});
  EXPECT_EQ(again.exit_code, 2) << again.out;
  // "already approved", or "already completed" when the session has ended by then.
  EXPECT_NE(again.out.find("already"), std::string::npos) << again.out;
  EXPECT_EQ(platform_->Sinew({"tail", id}).exit_code, 0);
  auto replay = platform_->Sinew({"replay", id});
  EXPECT_NE(replay.out.find("approval?"), std::string::npos) << replay.out;
  EXPECT_NE(replay.out.find("approved"), std::string::npos) << replay.out;
  EXPECT_NE(replay.out.find("running -> requires_action"), std::string::npos) << replay.out;
}

// Conversations that stay open (docs/harness.md): run --keep-open waits for input after
// the turn; close completes it; a second close is refused.
TEST_F(CliRemoteTest, CloseEndsAConversationThatStaysOpen) {
  EXPECT_EQ(platform_->Sinew({"run", "x", "--keep-open"}).exit_code, 2);  // needs --detach
  std::string id = Detached("answer", {"--keep-open"});
  ASSERT_FALSE(id.empty());
  auto status_of = [&] {
    auto show = platform_->Sinew({"--json", "sessions", "show", id});
    return show.exit_code == 0 ? std::string(boost::json::parse(Lines(show.out).at(0)).at("status").as_string())
                               : std::string();
  };
  std::string status;
  for (int i = 0; i < 600 && (status = status_of()) != "waiting_for_input"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(status, "waiting_for_input");
  auto close = platform_->Sinew({"close", id});
  EXPECT_EQ(close.exit_code, 0) << close.out;
  EXPECT_NE(close.out.find("close requested for " + id), std::string::npos) << close.out;
  for (int i = 0; i < 600 && (status = status_of()) != "completed"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(status, "completed");
  auto again = platform_->Sinew({"close", id});
  EXPECT_EQ(again.exit_code, 2) << again.out;
  EXPECT_NE(again.out.find("already completed"), std::string::npos) << again.out;
}

TEST_F(CliRemoteTest, ExitCodesSayHowTheSessionEnded) {
  EXPECT_EQ(platform_->Sinew({"run", "x", "--model", "answer"}).exit_code, 0);
  auto limited = platform_->Sinew({"run", "x", "--model", "loop", "--max-turns", "2"});
  EXPECT_EQ(limited.exit_code, 4) << limited.out;
  std::string stuck = Detached("stuck");
  ASSERT_FALSE(stuck.empty());
  auto cancel = platform_->Sinew({"cancel", stuck});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.out;
  EXPECT_EQ(platform_->Sinew({"tail", stuck}).exit_code, 3);
}

TEST_F(CliRemoteTest, SessionsListShowAndJson) {
  std::string id = Detached("answer");
  ASSERT_EQ(platform_->Sinew({"tail", id}).exit_code, 0);
  auto list = platform_->Sinew({"sessions", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.out;
  EXPECT_EQ(Lines(list.out)[0].rfind("ID", 0), 0u);
  EXPECT_NE(list.out.find(id + "  completed"), std::string::npos) << list.out;
  auto js = platform_->Sinew({"--json", "sessions", "list", "--status", "completed"});
  ASSERT_EQ(js.exit_code, 0);
  auto first = boost::json::parse(Lines(js.out).at(0));
  EXPECT_EQ(first.at("id").as_string(), id);
  EXPECT_EQ(first.at("status").as_string(), "completed");
  auto show = platform_->Sinew({"sessions", "show", id});
  EXPECT_EQ(show.exit_code, 0);
  EXPECT_NE(show.out.find("status:   completed"), std::string::npos) << show.out;
  auto msg = platform_->Sinew({"message", id, "and now?"});
  EXPECT_EQ(msg.exit_code, 0) << msg.out;
  auto events = platform_->Sinew({"--json", "replay", id});
  bool found = false;
  for (const auto& l : Lines(events.out)) {
    if (l.find("and now?") != std::string::npos) found = true;
  }
  EXPECT_TRUE(found) << events.out;
}

// An export is a read: the log stays as it was, so `tail` of the exported session still
// ends, and export -> import -> export gives the same bytes (docs/security.md, "Audit log").
TEST_F(CliRemoteTest, ExportImportRoundTripIsByteIdenticalAndTailStillEnds) {
  std::string id = Detached("steps");
  ASSERT_EQ(platform_->Sinew({"tail", id}).exit_code, 0);
  std::string file = dir_.Sub("session.jsonl");
  auto exp = platform_->Sinew({"export", id, "-o", file});
  ASSERT_EQ(exp.exit_code, 0) << exp.out;
  std::string exported = test::ReadFile(file);
  EXPECT_GT(Lines(exported).size(), 8u);
  // The exported, completed session: tail prints it and exits 0; replay shows no audit.
  auto tail = platform_->Sinew({"tail", id});
  EXPECT_EQ(tail.exit_code, 0) << tail.out;
  auto replay = platform_->Sinew({"replay", id});
  EXPECT_EQ(replay.out.find("  audit "), std::string::npos) << replay.out;
  EXPECT_EQ(platform_->Sinew({"export", id}).out, exported);
  // The same id is taken in this store.
  auto conflict = platform_->Sinew({"import", file});
  EXPECT_EQ(conflict.exit_code, 2);
  // Into another store: same id, same events, same bytes.
  Platform other(dir_, "b");
  ASSERT_TRUE(other.up());
  auto imp = other.Sinew({"import", file});
  ASSERT_EQ(imp.exit_code, 0) << imp.out;
  EXPECT_EQ(Lines(imp.out).back(), id);
  auto again = other.Sinew({"export", id});
  ASSERT_EQ(again.exit_code, 0);
  EXPECT_EQ(again.out, exported);
  EXPECT_EQ(other.Sinew({"tail", id}).exit_code, 0);
  // A damaged file is named line by line and nothing is imported.
  std::ofstream(dir_.Sub("bad.jsonl")) << Lines(exported)[0] << "\n{not json\n";
  auto bad = other.Sinew({"import", dir_.Sub("bad.jsonl")});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("line 2"), std::string::npos) << bad.out;
}

TEST_F(CliRemoteTest, ForkSharesThePrefixAndDiverges) {
  std::string id = Detached("steps");
  ASSERT_EQ(platform_->Sinew({"tail", id}).exit_code, 0);
  auto fork = platform_->Sinew({"fork", id, "--at", "5", "--model", "answer", "--message",
                                "try another way", "--follow"});
  ASSERT_EQ(fork.exit_code, 0) << fork.out;
  std::string fid = Lines(fork.out).at(0);
  ASSERT_EQ(fid.size(), 32u) << fork.out;
  auto parent = Lines(platform_->Sinew({"export", id}).out);
  auto child = Lines(platform_->Sinew({"export", fid}).out);
  ASSERT_GT(child.size(), 6u);
  auto payload = [](const std::string& line) {
    auto v = boost::json::parse(line).as_object();
    v.erase("session_id");
    return boost::json::serialize(v);
  };
  auto created = boost::json::parse(child[0]).at("session_created");
  EXPECT_EQ(created.at("forked_from_session").as_string(), id);
  for (size_t i = 1; i < 5; ++i) EXPECT_EQ(payload(child[i]), payload(parent[i])) << i;
  // After the shared prefix the fork goes its own way, starting with the new message.
  bool diverged = false;
  for (size_t i = 5; i < child.size(); ++i) {
    if (child[i].find("try another way") != std::string::npos) diverged = true;
  }
  EXPECT_TRUE(diverged) << "the fork does not hold the new message";
  auto show = platform_->Sinew({"sessions", "show", fid});
  EXPECT_NE(show.out.find("forked:   from " + id + " at #5"), std::string::npos) << show.out;
  EXPECT_EQ(platform_->Sinew({"fork", id, "--at", "0"}).exit_code, 2);
  EXPECT_EQ(platform_->Sinew({"fork", id, "--at", "999"}).exit_code, 2);
  // Best-of-n: one id a line, each a fork of the same point.
  auto many = platform_->Sinew({"fork", id, "--at", "5", "-n", "3"});
  ASSERT_EQ(many.exit_code, 0) << many.out;
  std::set<std::string> ids;
  for (const auto& line : Lines(many.out)) {
    if (line.size() == 32) ids.insert(line);
  }
  EXPECT_EQ(ids.size(), 3u) << many.out;
  for (const auto& f : ids) {
    auto shown = platform_->Sinew({"sessions", "show", f});
    EXPECT_NE(shown.out.find("forked:   from " + id + " at #5"), std::string::npos) << shown.out;
  }
  EXPECT_EQ(platform_->Sinew({"fork", id, "--at", "5", "-n", "0"}).exit_code, 2);
  EXPECT_EQ(platform_->Sinew({"fork", id, "--at", "5", "-n", "17"}).exit_code, 2);
}

// tail keeps following across a harness crash: every event exactly once, in order.
TEST_F(CliRemoteTest, TailReconnectsAcrossHarnessCrashWithoutLossOrRepeat) {
  std::string id = Detached("steps");
  ASSERT_FALSE(id.empty());
  std::string cmd = "exec '" + testing::BinaryPath("sinew") + "' --json --server " +
                    platform_->url() + " --api-key " + kKey + " tail " + id;
  testing::Subprocess tail({"/bin/sh", "-c", cmd});
  auto first = tail.ReadLine(std::chrono::seconds(30));
  ASSERT_TRUE(first.has_value());
  std::vector<std::string> lines = {*first};
  platform_->KillHarness();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  platform_->StartHarness();  // same port; it takes the session over when the lease expires
  while (auto line = tail.ReadLine(std::chrono::seconds(60))) lines.push_back(*line);
  int status = tail.Wait();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::vector<uint64_t> seqs;
  for (const auto& l : lines) {
    auto v = boost::json::parse(l);
    seqs.push_back(std::stoull(std::string(v.at("seq").as_string())));
  }
  ASSERT_FALSE(seqs.empty());
  for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], i + 1) << "event order broken";
  EXPECT_NE(lines.back().find("SESSION_STATUS_COMPLETED"), std::string::npos) << lines.back();
}

// Global flags after the subcommand (as docs/cli.md writes them), unknown commands named,
// and a non-ASCII task's default title cut between characters.
TEST_F(CliRemoteTest, GlobalFlagsAnywhereUnknownCommandsNamedTitlesWhole) {
  std::string task = "x";
  for (int i = 0; i < 60; ++i) task += "\xC3\xA9";  // the 80-byte cut falls inside an "é"
  auto run = platform_->Sinew({"run", task, "--detach", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.out;
  auto listed = platform_->Sinew({"sessions", "list", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.out;
  auto first = boost::json::parse(Lines(listed.out).at(0));
  EXPECT_EQ(std::string(first.at("title").as_string()), task.substr(0, 79));
  auto bogus = RunSinew({"bogus"});
  EXPECT_EQ(bogus.exit_code, 2);
  EXPECT_NE(bogus.out.find("unknown command 'bogus'"), std::string::npos) << bogus.out;
}

TEST_F(CliRemoteTest, ErrorsSayWhatToDoNext) {
  auto unknown = platform_->Sinew({"sessions", "show", std::string(32, 'a')});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.out.find("sinew sessions list"), std::string::npos) << unknown.out;
  auto bad_key = RunSinew({"--server", platform_->url(), "--api-key", "wrong", "sessions", "list"});
  EXPECT_EQ(bad_key.exit_code, 2);
  EXPECT_NE(bad_key.out.find("key refused"), std::string::npos) << bad_key.out;
  auto missing = platform_->Sinew({"import", dir_.Sub("absent.jsonl")});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.out.find("cannot read"), std::string::npos);
  auto help = RunSinew({"replay", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--step"), std::string::npos);
}

// sinew webhook: create prints the id and the secret once; ls, deliveries, rm; a refused
// URL exits 2 with the server's reason and creates nothing.
TEST_F(CliRemoteTest, WebhookCreateListDeliveriesAndRm) {
  auto made = platform_->Sinew({"webhook", "create", "https://example.com/hook", "--event", "session.error"});
  ASSERT_EQ(made.exit_code, 0) << made.out;
  auto words = Lines(made.out).at(0);
  const std::string id = words.substr(0, words.find(' '));
  ASSERT_EQ(id.size(), 32u) << made.out;
  EXPECT_NE(made.out.find("whsec_"), std::string::npos) << made.out;
  auto listed = platform_->Sinew({"webhook", "ls"});
  EXPECT_EQ(listed.exit_code, 0);
  EXPECT_NE(listed.out.find(id + "  https://example.com/hook  session.error"), std::string::npos) << listed.out;
  EXPECT_EQ(listed.out.find("whsec_"), std::string::npos) << listed.out;
  EXPECT_EQ(platform_->Sinew({"webhook", "deliveries", id}).exit_code, 0);
  auto refused = platform_->Sinew({"webhook", "create", "http://127.0.0.1:9/x"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.out.find("loopback"), std::string::npos) << refused.out;
  EXPECT_EQ(Lines(platform_->Sinew({"webhook", "ls"}).out).size(), 1u);
  EXPECT_EQ(platform_->Sinew({"webhook", "rm", id}).exit_code, 0);
  EXPECT_EQ(platform_->Sinew({"webhook", "ls"}).out, "");
  EXPECT_EQ(platform_->Sinew({"webhook", "deliveries", id}).exit_code, 2);
}

}  // namespace
}  // namespace sinew::cli
