#include "snapshot_checks.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace sinew::sandbox::testing {

namespace fs = std::filesystem;

v1::SandboxInfo ProvisionOwned(SandboxdProcess& d, const std::string& owner) {
  v1::ProvisionRequest req;
  *req.mutable_resources() = SmallResources();
  req.set_owner(owner);
  auto box = d.client().ProvisionWith(req);
  EXPECT_TRUE(box.ok()) << box.status().ToString();
  if (!box.ok()) return {};
  EXPECT_EQ(box->owner(), owner);
  return *box;
}

bool RunscUsable(SandboxdProcess& d) {
  auto health = d.client().Health();
  return health.ok() && health->runtime().find("runsc") != std::string::npos;
}

v1::SandboxInfo ProvisionRunsc(SandboxdProcess& d, const std::string& owner) {
  v1::ProvisionRequest req;
  *req.mutable_resources() = SmallResources();
  req.mutable_resources()->set_runtime("runsc");
  req.set_owner(owner);
  auto box = d.client().ProvisionWith(req);
  EXPECT_TRUE(box.ok()) << box.status().ToString();
  return box.ok() ? *box : v1::SandboxInfo();
}

void StartMemoryHolder(SandboxClient& tools) {
  auto r = Bash(tools,
                "cat > /tmp/holder.py <<'EOF'\n"
                "import os, random, signal, time\n"
                "secret = random.getrandbits(64)\n"
                "n = 0\n"
                "def dump(*_):\n"
                "    with open('/tmp/state.new', 'w') as f: f.write(f'{os.getpid()} {secret} {n}\\n')\n"
                "    os.rename('/tmp/state.new', '/tmp/state')\n"
                "signal.signal(signal.SIGUSR1, dump)\n"
                "open('/tmp/holder.pid', 'w').write(str(os.getpid()))\n"
                "while True:\n"
                "    n += 1\n"
                "    time.sleep(0.01)\n"
                "EOF\n"
                "setsid python3 /tmp/holder.py >/dev/null 2>&1 </dev/null & "
                "until [ -s /tmp/holder.pid ]; do sleep 0.02; done; echo started");
  EXPECT_EQ(r.output(), "started\n");
}

std::string HolderState(SandboxClient& tools) {
  return Bash(tools,
              "rm -f /tmp/state; kill -USR1 $(cat /tmp/holder.pid) || exit 1; "
              "while [ ! -s /tmp/state ]; do sleep 0.02; done; cat /tmp/state")
      .output();
}

std::unique_ptr<SandboxClient> Connect(const v1::SandboxInfo& info) {
  auto tools = SandboxClient::ConnectTo(info);
  EXPECT_TRUE(tools.ok()) << tools.status().ToString();
  return tools.ok() ? std::move(*tools) : nullptr;
}

void WriteHostileTree(SandboxClient& tools) {
  auto r = Bash(tools,
                "set -e; cd /workspace; mkdir -p src/deep/er; printf \"print('hi')\\n\" > src/main.py; "
                "chmod 751 src/main.py; head -c 2500000 /dev/urandom > src/deep/er/blob.bin; "
                "ln -s /etc/shadow secret; ln -s ../../../../../../etc up; ln src/main.py hard; "
                "mkfifo pipe; truncate -s 1G big.sparse; printf end >> big.sparse; "
                "echo tmpdata > /tmp/t.txt; echo shm > /dev/shm/s; chmod 700 src/deep; "
                "touch -d '2001-02-03 04:05:06' src/main.py; echo written");
  EXPECT_EQ(r.output(), "written\n") << r.output();
}

std::string Manifest(SandboxClient& tools) {
  auto r = Bash(tools,
                "cd / && find workspace tmp dev/shm -mindepth 1 -printf '%y %m %U %G %n %s %T@ %p -> %l\\n' "
                "| LC_ALL=C sort; find workspace tmp dev/shm -type f ! -name '*.sparse' -print0 "
                "| xargs -0 -r sha256sum | LC_ALL=C sort; "
                "if [ -e workspace/big.sparse ]; then tail -c 3 workspace/big.sparse; echo; "
                "[ $(du -k workspace/big.sparse | cut -f1) -lt 4096 ] && echo still-sparse; fi");
  EXPECT_FALSE(r.is_error()) << r.output();
  return r.output();
}

uint64_t CountFiles(const std::string& dir) {
  uint64_t n = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec)) ++n;
  }
  return n;
}

}  // namespace sinew::sandbox::testing
