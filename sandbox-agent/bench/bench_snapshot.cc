// bench_snapshot: snapshot, fork, pause and resume figures of runc (or, --runtime runsc,
// gVisor: checkpoint and restore of memory and processes) sandboxes with a 100 MB
// workspace, beside a cold start (docs/sandbox.md, "Benchmark"). Needs root and the
// default image.
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "bench_daemon.h"
#include "sinew/sandbox/sandbox_client.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using sinew::sandbox::bench::BenchDaemon;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Bytes the files below `dir` take on disk (allocated blocks).
uint64_t DiskBytes(const std::string& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    struct stat st{};
    if (lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) bytes += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return bytes;
}

template <typename T>
T Must(sinew::Result<T> r, const char* what) {
  if (!r.ok()) {
    std::cerr << "bench_snapshot: " << what << ": " << r.status().ToString() << "\n";
    std::exit(1);
  }
  return std::move(*r);
}

sinew::v1::Resources Shape(const std::string& runtime) {
  sinew::v1::Resources r;
  r.set_runtime(runtime);
  r.set_workspace_bytes(256ull << 20);
  r.set_memory_limit_bytes(1ull << 30);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_snapshot: pause/resume, snapshot and fork figures of runc sandboxes"};
  int n = 5, forks = 16, mb = 100;
  std::string image_root = "/var/lib/sinew/images";
  std::string bin_dir;
  std::string runtime = "runc";
  app.add_option("--runtime", runtime, "runc or runsc")->check(CLI::IsMember({"runc", "runsc"}))->capture_default_str();
  app.add_option("--iterations", n, "pause/resume cycles, snapshots and cold starts")->capture_default_str();
  app.add_option("--forks", forks, "sandboxes of the fork")->check(CLI::Range(1, 16))->capture_default_str();
  app.add_option("--workspace-mb", mb, "random data written to the workspace (MB)")->capture_default_str();
  app.add_option("--image-root", image_root, "image directory")->capture_default_str();
  app.add_option("--bin-dir", bin_dir, "where sinew-sandboxd is (default: next to this binary)");
  CLI11_PARSE(app, argc, argv);
  if (bin_dir.empty()) bin_dir = fs::read_symlink("/proc/self/exe").parent_path().string();
  if (geteuid() != 0 || !fs::exists(image_root + "/default/READY")) {
    std::cerr << "bench_snapshot: needs root and the default image (sandbox-agent/image/build-image.sh)\n";
    return 2;
  }
  BenchDaemon d(bin_dir, image_root, 35000 + getpid() % 5000, 0, {"--snapshot-bytes-per-owner", "0"});
  auto& prov = d.client();
  const std::string store = d.state_dir() + "/snapshots";

  std::vector<double> cold;
  for (int i = 0; i < n; ++i) {
    auto t = Clock::now();
    auto box = Must(prov.Provision(Shape(runtime)), "provision");
    cold.push_back(Ms(Clock::now() - t));
    (void)prov.Destroy(box.id());
  }

  sinew::v1::ProvisionRequest req;
  *req.mutable_resources() = Shape(runtime);
  req.set_owner("bench");
  auto box = Must(prov.ProvisionWith(req), "provision");
  {
    auto tools = Must(sinew::sandbox::SandboxClient::ConnectTo(box), "connect");
    auto w = Must(tools->Execute("bash", R"({"command":"head -c )" + std::to_string(mb) +
                                             R"(000000 /dev/urandom > /workspace/data.bin && echo ok"})"),
                  "write the workspace");
    if (w.output() != "ok\n") {
      std::cerr << "bench_snapshot: writing the workspace failed: " << w.output() << "\n";
      return 1;
    }
  }

  // Snapshots of the unchanged workspace: the first stores it, the others add nothing.
  std::vector<double> snap_ms, frozen_ms;
  uint64_t first_added = 0, later_added = 0;
  std::string snapshot_id;
  for (int i = 0; i <= n; ++i) {
    auto t = Clock::now();
    auto s = Must(prov.Snapshot(box.id(), "bench"), "snapshot");
    const double ms = Ms(Clock::now() - t);
    if (i == 0) {
      first_added = s.added_bytes();
      snapshot_id = s.id();
      std::printf("  first snapshot (stores %d MB)         %9.1f ms  added %llu bytes\n", mb, ms,
                  static_cast<unsigned long long>(s.added_bytes()));
      continue;
    }
    snap_ms.push_back(ms);
    frozen_ms.push_back(static_cast<double>(s.duration_ms()));
    later_added += s.added_bytes();
    (void)prov.DeleteSnapshot(s.id(), "bench");
  }
  const uint64_t one_copy = DiskBytes(store);

  // Pause/resume cycles of the sandbox with its workspace.
  std::vector<double> pause_ms, resume_ms;
  for (int i = 0; i < n; ++i) {
    auto t = Clock::now();
    (void)Must(prov.Pause(box.id(), "bench"), "pause");
    pause_ms.push_back(Ms(Clock::now() - t));
    t = Clock::now();
    (void)Must(prov.Resume(box.id(), "bench"), "resume");
    resume_ms.push_back(Ms(Clock::now() - t));
  }

  // Forks of the stored snapshot.
  sinew::v1::ForkRequest fork;
  fork.set_owner("bench");
  fork.set_snapshot_id(snapshot_id);
  fork.set_n(static_cast<uint32_t>(forks));
  *fork.mutable_resources() = Shape(runtime);
  auto t = Clock::now();
  auto forked = Must(prov.Fork(fork), "fork");
  const double fork_ms = Ms(Clock::now() - t);
  const uint64_t after_fork = DiskBytes(store);

  std::printf("  cold start (Provision, no pool)        p50 %9.1f ms\n", Median(cold));
  std::printf("  snapshot of the unchanged workspace    p50 %9.1f ms  (frozen %.1f ms)  added %llu bytes in %d\n",
              Median(snap_ms), Median(frozen_ms), static_cast<unsigned long long>(later_added), n);
  std::printf("  pause  (%d MB workspace)              p50 %9.1f ms\n", mb, Median(pause_ms));
  std::printf("  resume (%d MB workspace)              p50 %9.1f ms\n", mb, Median(resume_ms));
  std::printf("  fork of %d sandboxes                    %9.1f ms\n", forks, fork_ms);
  std::printf("  snapshot store on disk: one copy %llu bytes, after the fork %llu bytes (%.2fx)\n",
              static_cast<unsigned long long>(one_copy), static_cast<unsigned long long>(after_fork),
              one_copy ? static_cast<double>(after_fork) / static_cast<double>(one_copy) : 0.0);
  std::printf("  (each fork's workspace is its own tmpfs: %d x %d MB of memory, no disk)\n", forks, mb);
  std::printf("  first snapshot added %llu bytes\n", static_cast<unsigned long long>(first_added));
  std::printf("  (runtime %s%s)\n", runtime.c_str(),
              runtime == "runsc" ? ": memory and processes checkpointed and restored" : ": files only");
  std::printf("ratios (p50):\n  resume / cold start     %.2fx  (target <= 1.5x)\n", Median(resume_ms) / Median(cold));
  for (const auto& f : forked.sandboxes()) (void)prov.Destroy(f.id());
  (void)prov.Destroy(box.id());
  return 0;
}
