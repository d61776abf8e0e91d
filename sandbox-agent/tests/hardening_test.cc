// Attacks from inside sandboxes beyond the isolation suite: redirecting the host's
// connection through the agent's socket, racing write_file out of the workspace,
// exhausting per-uid kernel limits for the next sandbox, guessing ids, leaving cgroups
// behind, reading host paths from mountinfo.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <regex>
#include <set>
#include <thread>

#include "sandboxd_process.h"

namespace sinew::sandbox::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

std::string Quote(const std::string& code) {
  std::string quoted;
  for (char c : code) quoted += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return "'" + quoted + "'";
}

class HardeningTest : public ::testing::Test {
 protected:
  void SetUp() override { daemon_.Start({"--warm-pool-size", "0"}); }
  v1::SandboxInfo Provision() {
    auto box = daemon_.client().Provision(SmallResources());
    EXPECT_TRUE(box.ok()) << box.status().ToString();
    return box.ok() ? *box : v1::SandboxInfo();
  }
  // What a harness that took a session over does: ask the provisioner, connect afresh.
  std::unique_ptr<SandboxClient> Reconnect(const std::string& id) {
    auto info = daemon_.client().Get(id);
    EXPECT_TRUE(info.ok());
    auto c = SandboxClient::ConnectTo(*info);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }
  SandboxdProcess daemon_;
};

// Finding 1: a sandbox replaced its agent.sock with a link to another sandbox's socket
// (or to a host socket) and the next host connection followed it.
TEST_F(HardeningTest, SandboxCannotRedirectTheHostToAnotherSandboxOrAHostSocket) {
  auto a = Provision();
  auto b = Provision();
  auto ca = SandboxClient::ConnectTo(a);
  auto cb = SandboxClient::ConnectTo(b);
  ASSERT_TRUE(ca.ok() && cb.ok());
  Bash(**ca, "echo I-am-A > /workspace/marker");
  Bash(**cb, "echo I-am-B > /workspace/marker");

  // A host unix socket that counts connections: a root process must never reach it.
  std::string host_sock = daemon_.state_dir() + "-host.sock";
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  host_sock.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 8), 0);

  std::string b_sock = b.endpoint().substr(std::string("unix://").size());
  std::string a_sock = a.endpoint().substr(std::string("unix://").size());
  // Everything the old attack did, and the paths of the new layout, from inside A.
  auto attack = Bash(**ca,
                     "for d in /.sinew/run /.sinew/agent " + fs::path(a_sock).parent_path().string() +
                         "; do ln -sf " + b_sock + " $d/agent.sock 2>&1; "
                         "ln -sf " + host_sock + " $d/agent.sock 2>&1; done; "
                         "ls -la " + fs::path(a_sock).parent_path().string() + " 2>&1; echo done");
  EXPECT_THAT(attack.output(), Not(HasSubstr(" -> ")));  // no link was made anywhere
  EXPECT_THAT(attack.output(), HasSubstr("done"));
  // A socket bound by the sandbox itself cannot take the agent's place either.
  Bash(**ca, "python3 -c " + Quote("import socket\ns=socket.socket(socket.AF_UNIX)\n"
                                   "s.bind('/.sinew/run/agent.sock')") + " 2>&1");

  // A new client (a harness taking the session over) reaches A and only A.
  auto fresh = Reconnect(a.id());
  ASSERT_NE(fresh, nullptr);
  auto who = Bash(*fresh, "cat /workspace/marker");
  EXPECT_EQ(who.output(), "I-am-A\n");
  EXPECT_EQ(accept(listener, nullptr, nullptr), -1);  // the host socket saw no connection
  close(listener);
  unlink(host_sock.c_str());

  // Even if a connection were redirected, the client would notice: B cannot prove A.
  SandboxClientOptions as_a;
  as_a.sandbox_id = a.id();
  as_a.secret = a.agent_secret();
  auto misdirected = SandboxClient::Connect(b.endpoint(), as_a);
  ASSERT_TRUE(misdirected.ok());
  auto r = (*misdirected)->Execute("bash", R"({"command":"cat /workspace/marker"})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated) << r.status().ToString();
  as_a.secret = b.agent_secret();  // even with B's secret, B cannot answer as A
  misdirected = SandboxClient::Connect(b.endpoint(), as_a);
  ASSERT_TRUE(misdirected.ok());
  r = (*misdirected)->Execute("bash", R"({"command":"cat /workspace/marker"})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  // And the peer must run as A's host uid.
  SandboxClientOptions uid_a;
  uid_a.expected_uid = a.host_uid();
  auto wrong_peer = SandboxClient::Connect(b.endpoint(), uid_a);
  ASSERT_FALSE(wrong_peer.ok());
  EXPECT_EQ(wrong_peer.status().code(), StatusCode::kPermissionDenied);
}

// Finding 2: swapping a directory and a symbolic link with renameat2(RENAME_EXCHANGE) in
// a loop let write_file land outside /workspace.
TEST_F(HardeningTest, WriteFileCannotBeRacedOutOfTheWorkspace) {
  auto a = Provision();
  auto c = SandboxClient::ConnectTo(a);
  ASSERT_TRUE(c.ok());
  const std::string racer =
      "import ctypes, os, time\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "os.makedirs('/tmp/escape', exist_ok=True)\n"
      "os.chdir('/workspace')\n"
      "os.makedirs('d', exist_ok=True)\n"
      "os.symlink('/tmp/escape', 'l')\n"
      "open('/tmp/started', 'w').close()\n"
      "n = 0\n"
      "while not os.path.exists('/tmp/stop'):\n"
      "    libc.renameat2(-100, b'd', -100, b'l', 2)\n"  // AT_FDCWD, RENAME_EXCHANGE
      "    n += 1\n"
      "open('/tmp/swaps', 'w').write(str(n))\n";
  Bash(**c, "nohup python3 -c " + Quote(racer) + " >/dev/null 2>&1 &");
  // The writes race the swaps from the racer's first swap until the test stops it.
  EXPECT_EQ(Bash(**c, "until [ -e /tmp/started ]; do sleep 0.05; done; echo started").output(),
            "started\n");
  int accepted = 0, refused = 0;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    for (const char* path : {"d/x", "l/x", "d/sub/y"}) {
      auto r = (*c)->Execute("write_file", std::string(R"({"path":")") + path + R"(","content":"w"})");
      ASSERT_TRUE(r.ok());
      (r->is_error() ? refused : accepted)++;
    }
  }
  auto escaped = Bash(**c, "touch /tmp/stop; until [ -s /tmp/swaps ]; do sleep 0.05; done; "
                           "cat /tmp/swaps; echo; find /tmp/escape -mindepth 1 | head");
  std::cout << "write_file race: " << accepted << " accepted, " << refused << " refused, swaps "
            << escaped.output().substr(0, escaped.output().find('\n')) << "\n";
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);  // the race was really on: some resolutions met the link
  // Nothing ever landed outside the workspace.
  EXPECT_EQ(escaped.output().substr(escaped.output().find('\n') + 1), "") << escaped.output();
}

// Finding 3: one host uid for every sandbox shared per-uid kernel limits.
TEST_F(HardeningTest, PerUidKernelLimitsArePerSandbox) {
  auto a = Provision();
  auto b = Provision();
  EXPECT_NE(a.host_uid(), 0u);
  EXPECT_NE(a.host_uid(), b.host_uid());
  EXPECT_GE(a.host_uid(), daemon_.userns_uid_base());
  auto ca = SandboxClient::ConnectTo(a);
  auto cb = SandboxClient::ConnectTo(b);
  ASSERT_TRUE(ca.ok() && cb.ok());
  // A holds every inotify instance its uid may have and fills its message-queue budget.
  const std::string hog =
      "import ctypes, os, time\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "rt = libc\n"
      "fds = [libc.inotify_init() for _ in range(200)]\n"
      "qs = [rt.mq_open(('/q%d' % i).encode(), os.O_CREAT | os.O_RDWR, 0o600, None) for i in range(20)]\n"
      "open('/tmp/held', 'w').write('%d %d' % (sum(f >= 0 for f in fds), sum(q >= 0 for q in qs)))\n"
      "time.sleep(30)\n";
  Bash(**ca, "nohup python3 -c " + Quote(hog) + " >/tmp/hog.log 2>&1 &");
  std::string held;
  for (int i = 0; i < 100 && (held.empty() || !isdigit(held[0])); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    held = Bash(**ca, "cat /tmp/held 2>/dev/null || true").output();
  }
  int inotify_held = -1, queues_held = -1;
  ASSERT_EQ(sscanf(held.c_str(), "%d %d", &inotify_held, &queues_held), 2)
      << held << Bash(**ca, "cat /tmp/hog.log").output();
  EXPECT_LT(inotify_held, 200);  // A really hit its own limits
  EXPECT_LT(queues_held, 20);
  // B (and a host process of the old shared uid 1000) are unaffected.
  const std::string probe =
      "import ctypes, os\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "rt = libc\n"
      "fd = libc.inotify_init()\n"
      "q = rt.mq_open(b'/probe', os.O_CREAT | os.O_RDWR, 0o600, None)\n"
      "print('inotify', 'ok' if fd >= 0 else 'errno %d' % ctypes.get_errno(), "
      "'mqueue', 'ok' if q >= 0 else 'errno %d' % ctypes.get_errno())\n";
  EXPECT_EQ(Bash(**cb, "python3 -c " + Quote(probe) + " 2>&1").output(), "inotify ok mqueue ok\n");
  std::string host = "setpriv --reuid 1000 --regid 1000 --clear-groups /usr/bin/python3 -c " + Quote(probe);
  FILE* p = popen(host.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[256] = {};
  size_t n = fread(buf, 1, sizeof(buf) - 1, p);
  pclose(p);
  EXPECT_EQ(std::string(buf, n), "inotify ok mqueue ok\n");
}

// Finding 4: ids from a Mersenne Twister seeded once were predictable.
TEST_F(HardeningTest, IdsAndSecretsAre128RandomBits) {
  std::set<std::string> ids, secrets;
  const std::regex id_form("sb-[0-9a-f]{32}");
  const std::regex secret_form("[0-9a-f]{32}");
  for (int i = 0; i < 4; ++i) {
    auto box = Provision();
    EXPECT_TRUE(std::regex_match(box.id(), id_form)) << box.id();
    EXPECT_TRUE(std::regex_match(box.agent_secret(), secret_form));
    ids.insert(box.id());
    secrets.insert(box.agent_secret());
    ASSERT_TRUE(daemon_.client().Destroy(box.id()).ok());
  }
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(secrets.size(), 4u);
  // Neither the id nor the secret is readable inside the sandbox.
  auto box = Provision();
  auto c = SandboxClient::ConnectTo(box);
  ASSERT_TRUE(c.ok());
  // (The secret must not appear in this command line, which ps lists.)
  auto look = Bash(**c, "cat /proc/1/environ /proc/1/cmdline 2>&1; env; ps -eo args; "
                        "find /workspace /tmp /dev/shm -type f -exec cat {} + 2>/dev/null");
  EXPECT_THAT(look.output(), Not(HasSubstr(box.agent_secret())));
}

// Finding 5: after a clean stop the parent cgroup stayed in the unified (v2) hierarchy.
TEST_F(HardeningTest, CleanStopRemovesEveryCgroupInEveryHierarchy) {
  auto a = Provision();
  auto c = SandboxClient::ConnectTo(a);
  ASSERT_TRUE(c.ok());
  Bash(**c, "true");
  EXPECT_FALSE(daemon_.ParentCgroups().empty());  // made while it ran
  daemon_.Kill(SIGTERM);
  EXPECT_THAT(daemon_.ParentCgroups(), ::testing::IsEmpty());
}

// Finding 6: mountinfo named host paths, and the agent's output was a host file.
TEST_F(HardeningTest, MountinfoNamesNoStatePathAndTheAgentHasNoHostFile) {
  auto a = Provision();
  auto c = SandboxClient::ConnectTo(a);
  ASSERT_TRUE(c.ok());
  auto info = Bash(**c, "cat /proc/self/mountinfo");
  EXPECT_THAT(info.output(), Not(HasSubstr(daemon_.state_dir())));
  EXPECT_THAT(info.output(), Not(HasSubstr("/sandboxes/")));
  auto fd = Bash(**c, "ls -l /proc/1/fd/ 2>&1; cat /proc/1/fd/1 2>&1 | head -c 100");
  EXPECT_THAT(fd.output(), Not(HasSubstr("agent.log")));
  EXPECT_THAT(fd.output(), HasSubstr("Permission denied"));
}

}  // namespace
}  // namespace sinew::sandbox::testing
