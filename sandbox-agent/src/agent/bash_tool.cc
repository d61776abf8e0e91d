// The bash tool: runs a command in its own process group with a timeout, collecting
// stdout and stderr (interleaved as they come) under the output cap.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "agent/child_reaper.h"
#include "agent/output_limiter.h"
#include "agent/tool_input.h"
#include "agent/tools.h"

namespace sinew::sandbox {
namespace {

using Clock = std::chrono::steady_clock;

// How long output is still read after the command exited, for background processes
// that keep the pipes open.
constexpr auto kDrainAfterExit = std::chrono::milliseconds(100);

struct Pipe {
  int read_fd = -1;
  int write_fd = -1;
};

Result<Pipe> MakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return Status::IOError(std::string("pipe: ") + std::strerror(errno));
  return Pipe{fds[0], fds[1]};
}

class BashTool final : public Tool {
 public:
  explicit BashTool(ToolConfig config) : Tool(kBashToolSpec), config_(std::move(config)) {}


  v1::ExecuteResult Run(const boost::json::object& json, const RunContext& ctx) const override {
    auto input = ToolInput::Make(json, {"command", "timeout", "cwd"});
    if (!input.ok()) return ErrorResult(input.status().message());
    auto command = input->RequiredString("command");
    if (!command.ok()) return ErrorResult(command.status().message());
    if (command->empty()) return ErrorResult("field 'command' is empty");
    if (command->find('\0') != std::string::npos)
      return ErrorResult("field 'command' contains a NUL byte");
    auto timeout = input->OptionalInt("timeout", 1, config_.max_timeout_s);
    if (!timeout.ok()) return ErrorResult(timeout.status().message());
    auto cwd_raw = input->OptionalString("cwd");
    if (!cwd_raw.ok()) return ErrorResult(cwd_raw.status().message());
    std::filesystem::path cwd = config_.workspace;
    if (cwd_raw->has_value()) {
      auto resolved = ResolvePath(config_, **cwd_raw, false);
      if (!resolved.ok()) return ErrorResult("cwd: " + resolved.status().message());
      cwd = *resolved;
    }
    std::error_code ec;
    if (!std::filesystem::is_directory(cwd, ec)) {
      return ErrorResult("cwd '" + cwd.string() + "' is not an existing directory");
    }
    return RunCommand(*command, cwd,
                      std::chrono::seconds(timeout->value_or(config_.default_timeout_s)), ctx);
  }

 private:
  v1::ExecuteResult RunCommand(const std::string& command, const std::filesystem::path& cwd,
                               std::chrono::seconds timeout, const RunContext& ctx) const {
    const ChunkSink& sink = ctx.sink;
    auto out = MakePipe();
    if (!out.ok()) return ErrorResult(out.status().message());
    auto err = MakePipe();
    if (!err.ok()) {
      close(out->read_fd), close(out->write_fd);
      return ErrorResult(err.status().message());
    }
    // Everything the child needs is prepared before fork: after it, only
    // async-signal-safe calls.
    std::string cwd_str = cwd.string();
    std::string home = "HOME=" + config_.workspace.string();
    std::vector<const char*> argv = {"bash", "-c", command.c_str(), nullptr};
    std::vector<const char*> envp = {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", home.c_str(),
        "LANG=C.UTF-8", "TERM=dumb", nullptr};
    int out_w = out->write_fd, err_w = err->write_fd;
    auto child = ChildReaper::Instance().Spawn([&] {
      setsid();
      int devnull = open("/dev/null", O_RDONLY);
      if (devnull >= 0) dup2(devnull, 0);
      dup2(out_w, 1);
      dup2(err_w, 2);
      if (chdir(cwd_str.c_str()) != 0) _exit(126);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      execve("/bin/bash", const_cast<char* const*>(argv.data()),
             const_cast<char* const*>(envp.data()));
      _exit(127);
    });
    close(out->write_fd);
    close(err->write_fd);
    if (!child.ok()) {
      close(out->read_fd), close(err->read_fd);
      return ErrorResult(child.status().message());
    }
    auto start = Clock::now();
    auto deadline = start + timeout;
    OutputLimiter output(config_.max_output_bytes);
    bool timed_out = false;
    bool exited = false;
    Clock::time_point drain_until{};
    int fds[2] = {out->read_fd, err->read_fd};
    char buf[16384];
    bool cancelled = false;
    for (;;) {
      auto now = Clock::now();
      if (!exited && !cancelled && ctx.cancelled && ctx.cancelled()) {
        cancelled = true;
        deadline = now;  // handled like a timeout below, reported as cancelled
      }
      if (!exited && now >= deadline) {
        kill(-child->pid, SIGKILL);
        kill(child->pid, SIGKILL);
        timed_out = true;
        deadline = Clock::time_point::max();
        drain_until = now + std::chrono::seconds(1);
      }
      if (exited && now >= drain_until) break;
      if (fds[0] < 0 && fds[1] < 0 && exited) break;
      pollfd pfds[3];
      int n = 0;
      for (int fd : fds) pfds[n++] = pollfd{fd, POLLIN, 0};
      pfds[n++] = pollfd{exited ? -1 : child->exit_fd, POLLIN, 0};
      auto wake = exited ? drain_until : std::min(deadline, timed_out ? drain_until : deadline);
      auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count();
      int rc = poll(pfds, n, static_cast<int>(std::clamp<int64_t>(wait_ms + 1, 0, 200)));
      if (rc < 0 && errno != EINTR) break;
      for (int k = 0; k < 2; ++k) {
        if (fds[k] < 0 || (pfds[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        ssize_t got = read(fds[k], buf, sizeof(buf));
        if (got > 0) {
          std::string_view chunk(buf, static_cast<size_t>(got));
          output.Append(chunk);
          if (sink) sink(k == 1, chunk);
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          close(fds[k]);
          fds[k] = -1;
        }
      }
      if (!exited && (pfds[2].revents & POLLIN)) {
        exited = true;
        if (!timed_out) drain_until = Clock::now() + kDrainAfterExit;
      }
    }
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
    if (!exited) {  // a timed-out command that never died: cannot happen after SIGKILL, but be safe
      kill(-child->pid, SIGKILL);
      pollfd p{child->exit_fd, POLLIN, 0};
      poll(&p, 1, 5000);
    }
    int status = ChildReaper::Instance().TakeStatus(child->pid);
    close(child->exit_fd);
    auto duration = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    auto result = MakeResult(output, status, timed_out && !cancelled, timeout, duration.count());
    if (cancelled) {
      result.set_is_error(true);
      result.set_output(result.output() +
                        "\n[cancelled by the caller: the process group was killed]");
    }
    return result;
  }

  static v1::ExecuteResult MakeResult(const OutputLimiter& output, int status, bool timed_out,
                                      std::chrono::seconds timeout, int64_t duration_ms) {
    v1::ExecuteResult r;
    std::string text = SanitizeUtf8(output.Finish());
    if (status != -1 && WIFEXITED(status)) {
      r.set_exit_code(WEXITSTATUS(status));
    } else if (status != -1 && WIFSIGNALED(status)) {
      r.set_exit_code(-1);
      r.set_signal(WTERMSIG(status));
    } else {
      r.set_exit_code(-1);
    }
    std::string trailer;
    if (timed_out) {
      trailer = "[timed out after " + std::to_string(timeout.count()) +
                " s: the process group was killed; raise `timeout` or run less at once]";
    } else if (r.signal() != 0) {
      trailer =
          "[killed by signal " + std::to_string(r.signal()) + " (" + strsignal(r.signal()) + ")]";
    } else if (r.exit_code() != 0) {
      trailer = "[exit code " + std::to_string(r.exit_code()) + "]";
    }
    if (text.empty() && trailer.empty()) text = "(no output)";
    if (!trailer.empty()) {
      if (!text.empty() && text.back() != '\n') text += '\n';
      text += trailer;
    }
    r.set_output(std::move(text));
    r.set_is_error(timed_out || r.exit_code() != 0);
    r.set_truncated(output.truncated());
    r.set_timed_out(timed_out);
    r.set_duration_ms(duration_ms);
    return r;
  }

  ToolConfig config_;
};

}  // namespace

std::unique_ptr<Tool> MakeBashTool(const ToolConfig& config) {
  return std::make_unique<BashTool>(config);
}

}  // namespace sinew::sandbox
