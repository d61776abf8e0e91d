// sinew sandbox create | ls | show | exec | cp | rm | snapshot | snapshots | rmsnap | fork |
// pause | resume: the sandbox API (/v1/sandboxes; docs/sandbox-api.md) from the command line.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <memory>
#include <string>
#include <vector>

#include "context.h"
#include "sinew/json_fields.h"

namespace sinew::cli {
namespace json = boost::json;
namespace {

std::string Str(const json::object& o, const char* key) { return json_fields::StringField(o, key); }

const json::object* Field(const json::value& v, const char* key) {
  return v.is_object() ? json_fields::ObjectField(v.as_object(), key) : nullptr;
}

// One line per sandbox: id, state, image, runtime, created.
void PrintSandboxLine(const json::object& s) {
  const json::object* res = json_fields::ObjectField(s, "resources");
  std::cout << Str(s, "id") << "  " << Str(s, "state") << "  " << (res ? Str(*res, "image") : "")
            << "  " << (res ? Str(*res, "runtime") : "") << "  "
            << FormatTime(static_cast<int64_t>(json_fields::UintField(s, "created_unix_ms")))
            << " UTC\n";
}

// "ID:PATH" of `sinew sandbox cp`: a sandbox id (32 hex digits) before the first ':'.
struct CopyEnd {
  bool remote = false;
  std::string id, path;  // path: in the sandbox when remote, else local ("-": stdin/stdout)
};

CopyEnd ParseCopyEnd(const std::string& arg) {
  const size_t colon = arg.find(':');
  if (colon == 32 && arg.find_first_not_of("0123456789abcdef") >= 32) {
    return CopyEnd{true, arg.substr(0, 32), arg.substr(33)};
  }
  return CopyEnd{false, "", arg};
}

Result<std::string> ReadLocal(const std::string& path) {
  std::ifstream in;
  std::istream* from = &std::cin;
  if (path != "-") {
    in.open(path, std::ios::binary);
    if (!in) return Status::NotFound("cannot read " + path);
    from = &in;
  }
  std::ostringstream data;
  data << from->rdbuf();
  if (from->bad()) return Status::IOError("cannot read " + path);
  return data.str();
}

// Writes `data` to `path` ("-": stdout); into a directory under the remote file's name.
Status WriteLocal(std::string path, const std::string& remote_path, const std::string& data) {
  if (path == "-") {
    std::cout.write(data.data(), static_cast<std::streamsize>(data.size()));
    std::cout.flush();
    return std::cout ? Status::Ok() : Status::IOError("cannot write to stdout");
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    path = (std::filesystem::path(path) / std::filesystem::path(remote_path).filename()).string();
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) return Status::IOError("cannot write " + path);
  return Status::Ok();
}

// Prints the answer's "sandbox" (or the whole answer with --json).
void PrintSandboxAnswer(Context& ctx, const json::value& v) {
  if (ctx.json) {
    std::cout << json::serialize(v) << "\n";
    return;
  }
  if (const json::object* s = Field(v, "sandbox")) PrintSandboxLine(*s);
}

// `sinew sandbox VERB ID` as POST /v1/sandboxes/ID/VERB (snapshot, pause, resume).
void AddSimpleVerb(CLI::App& sandbox, Context& ctx, const std::string& verb,
                   const std::string& help) {
  auto id = std::make_shared<std::string>();
  auto* cmd = sandbox.add_subcommand(verb, help);
  cmd->add_option("id", *id, "sandbox id")->required();
  cmd->callback([&ctx, id, verb] {
    auto v = ctx.Api().JsonCall("POST", "/v1/sandboxes/" + *id + "/" + verb);
    if (!v.ok()) return ctx.Fail(v.status());
    if (verb == "snapshot" && !ctx.json) {
      if (const json::object* snap = Field(*v, "snapshot")) std::cout << Str(*snap, "id") << "\n";
      return;
    }
    PrintSandboxAnswer(ctx, *v);
  });
}

}  // namespace

void AddSandboxCommands(CLI::App& app, Context& ctx) {
  auto* sandbox =
      app.add_subcommand("sandbox", "sandboxes for outside orchestrators (/v1/sandboxes)");
  sandbox->require_subcommand(1);

  struct CreateArgs {
    std::string image, runtime, from_snapshot;
    uint64_t cpu_millis = 0, memory_bytes = 0, memory_limit_bytes = 0, disk_bytes = 0, pids = 0,
             lifetime = 0;
  };
  auto create = std::make_shared<CreateArgs>();
  auto* cmd = sandbox->add_subcommand("create", "create a sandbox; prints its id");
  cmd->add_option("--image", create->image, "image built on the host (default: the host's)");
  cmd->add_option("--runtime", create->runtime, "runc or runsc (default: the host's)");
  cmd->add_option("--cpu-millis", create->cpu_millis, "CPU quota, 1000 = one core");
  cmd->add_option("--memory-bytes", create->memory_bytes, "guaranteed memory");
  cmd->add_option("--memory-limit-bytes", create->memory_limit_bytes, "memory ceiling");
  cmd->add_option("--disk-bytes", create->disk_bytes, "size of /workspace");
  cmd->add_option("--pids", create->pids, "most processes");
  cmd->add_option("--lifetime-seconds", create->lifetime, "ended after this long");
  cmd->add_option("--from-snapshot", create->from_snapshot, "restore this snapshot's files");
  cmd->callback([&ctx, create] {
    json::object body;
    auto put_string = [&](const char* key, const std::string& v) {
      if (!v.empty()) body[key] = v;
    };
    auto put_number = [&](const char* key, uint64_t v) {
      if (v != 0) body[key] = v;
    };
    put_string("image", create->image);
    put_string("runtime", create->runtime);
    put_string("from_snapshot", create->from_snapshot);
    put_number("cpu_millis", create->cpu_millis);
    put_number("memory_bytes", create->memory_bytes);
    put_number("memory_limit_bytes", create->memory_limit_bytes);
    put_number("disk_bytes", create->disk_bytes);
    put_number("pids", create->pids);
    put_number("lifetime_seconds", create->lifetime);
    auto v = ctx.Api().JsonCall("POST", "/v1/sandboxes", json::serialize(body));
    if (!v.ok()) return ctx.Fail(v.status());
    if (ctx.json) {
      std::cout << json::serialize(*v) << "\n";
    } else if (const json::object* s = Field(*v, "sandbox")) {
      std::cout << Str(*s, "id") << "\n";
    }
  });

  auto all = std::make_shared<bool>(false);
  cmd = sandbox->add_subcommand("ls", "list your sandboxes, newest first");
  cmd->add_flag("--all", *all, "also the ended and deleted ones");
  cmd->callback([&ctx, all] {
    std::string token;
    do {
      std::string path = "/v1/sandboxes?limit=100";
      if (*all) path += "&include_ended=true";
      if (!token.empty()) path += "&page_token=" + token;
      auto v = ctx.Api().JsonCall("GET", path);
      if (!v.ok()) return ctx.Fail(v.status());
      const json::array* list =
          v->is_object() ? json_fields::ArrayField(v->as_object(), "sandboxes") : nullptr;
      for (const auto& s : list ? *list : json::array{}) {
        if (!s.is_object()) continue;
        if (ctx.json) {
          std::cout << json::serialize(s) << "\n";
        } else {
          PrintSandboxLine(s.as_object());
        }
      }
      token = v->is_object() ? Str(v->as_object(), "next_page_token") : "";
    } while (!token.empty());
  });

  auto show_id = std::make_shared<std::string>();
  cmd = sandbox->add_subcommand("show", "one sandbox, with what its host says of it now");
  cmd->add_option("id", *show_id, "sandbox id")->required();
  cmd->callback([&ctx, show_id] {
    auto v = ctx.Api().JsonCall("GET", "/v1/sandboxes/" + *show_id);
    if (!v.ok()) return ctx.Fail(v.status());
    std::cout << json::serialize(ctx.json ? *v : *Field(*v, "sandbox")) << "\n";
  });

  struct ExecArgs {
    std::string id, call_id, tool = "bash", input;
    std::vector<std::string> command;
  };
  auto exec = std::make_shared<ExecArgs>();
  cmd = sandbox->add_subcommand(
      "exec", "run a command (bash) or another tool in a sandbox; prints its output");
  cmd->add_option("id", exec->id, "sandbox id")->required();
  cmd->add_option("command", exec->command, "the bash command line (after --)");
  cmd->add_option("--call-id", exec->call_id, "run exactly once: a repeat gets the first result");
  cmd->add_option("--tool", exec->tool, "another tool (read_file, write_file, ...) with --input");
  cmd->add_option("--input", exec->input, "the tool's input as a JSON object");
  cmd->callback([&ctx, exec] {
    json::object body{{"name", exec->tool}};
    if (!exec->input.empty()) {
      auto input = json_fields::ParseObject(exec->input, "--input");
      if (!input.ok()) return ctx.Fail(input.status());
      body["input"] = std::move(*input);
    } else {
      std::string line;
      for (const auto& part : exec->command) line += (line.empty() ? "" : " ") + part;
      if (line.empty())
        return ctx.Fail(
            Status::InvalidArgument("give a command after the id (or --tool and --input)"));
      body["input"] = json::object{{"command", line}};
    }
    if (!exec->call_id.empty()) body["call_id"] = exec->call_id;
    // The output as it comes (the API's event stream); --json prints the result object.
    std::string streamed;  // what was printed as it came
    auto v = ctx.json ? ctx.Api().JsonCall("POST", "/v1/sandboxes/" + exec->id + "/execute",
                                           json::serialize(body))
                      : ctx.Api().ExecuteStreamed(
                            exec->id, json::serialize(body),
                            [&](const std::string& stream, const std::string& text) {
                              std::ostream& to = stream == "stderr" ? std::cerr : std::cout;
                              to << text << std::flush;
                              streamed += text;
                            });
    if (!v.ok()) return ctx.Fail(v.status());
    const json::object* result = ctx.json ? Field(*v, "result") : (v->is_object() ? &v->as_object() : nullptr);
    if (result == nullptr) return ctx.Fail(Status::Internal("the server's answer has no result"));
    if (ctx.json) {
      std::cout << json::serialize(*result) << "\n";
    } else if (streamed.empty()) {
      // A tool that does not stream (read_file, ...), or a repeated call id's first result.
      std::cout << Str(*result, "output");
    }
    const bool is_error = json_fields::BoolField(*result, "is_error");
    const int64_t exit_status = json_fields::IntField(*result, "exit_code");
    if (is_error || exit_status != 0) {
      if (!ctx.json)
        std::cerr << "exit status " << exit_status << (is_error ? " (the call failed)" : "")
                  << "\n";
      ctx.exit_code = kExitFailed;
    }
  });

  auto rm_ids = std::make_shared<std::vector<std::string>>();
  cmd = sandbox->add_subcommand("rm", "destroy sandboxes");
  cmd->add_option("ids", *rm_ids, "sandbox ids")->required();
  cmd->callback([&ctx, rm_ids] {
    for (const auto& id : *rm_ids) {
      auto v = ctx.Api().JsonCall("DELETE", "/v1/sandboxes/" + id);
      if (!v.ok()) {
        ctx.Fail(v.status());
        continue;
      }
      PrintSandboxAnswer(ctx, *v);
    }
  });

  auto fork_id = std::make_shared<std::string>();
  auto fork_n = std::make_shared<uint32_t>(1);
  cmd = sandbox->add_subcommand("fork", "new sandboxes from a snapshot of one; prints their ids");
  cmd->add_option("id", *fork_id, "sandbox id")->required();
  cmd->add_option("-n", *fork_n, "how many (1-16)");
  cmd->callback([&ctx, fork_id, fork_n] {
    auto v = ctx.Api().JsonCall("POST", "/v1/sandboxes/" + *fork_id + "/fork",
                                json::serialize(json::object{{"n", *fork_n}}));
    if (!v.ok()) return ctx.Fail(v.status());
    if (ctx.json) {
      std::cout << json::serialize(*v) << "\n";
      return;
    }
    const json::array* made =
        v->is_object() ? json_fields::ArrayField(v->as_object(), "sandboxes") : nullptr;
    for (const auto& s : made ? *made : json::array{}) {
      if (s.is_object()) std::cout << Str(s.as_object(), "id") << "\n";
    }
  });

  auto cp = std::make_shared<std::pair<std::string, std::string>>();
  cmd = sandbox->add_subcommand(
      "cp", "copy a file into or out of a sandbox: cp LOCAL ID:PATH, or cp ID:PATH LOCAL "
            "('-' is stdin or stdout; PATH is below /workspace)");
  cmd->add_option("source", cp->first, "LOCAL or ID:PATH")->required();
  cmd->add_option("destination", cp->second, "ID:PATH or LOCAL")->required();
  cmd->callback([&ctx, cp] {
    const CopyEnd from = ParseCopyEnd(cp->first);
    const CopyEnd to = ParseCopyEnd(cp->second);
    if (from.remote == to.remote) {
      return ctx.Fail(Status::InvalidArgument(
          "exactly one side must be ID:PATH (a sandbox id, a colon, a path in the sandbox)"));
    }
    if (to.remote) {
      auto data = ReadLocal(from.path);
      if (!data.ok()) return ctx.Fail(data.status());
      auto file = ctx.Api().UploadFile(to.id, to.path, *data);
      if (!file.ok()) return ctx.Fail(file.status());
      if (ctx.json) {
        std::cout << json::serialize(*file) << "\n";
      } else if (file->is_object()) {
        const json::object& f = file->as_object();
        std::cout << Str(f, "path") << "  " << json_fields::UintField(f, "size") << " bytes  sha256 "
                  << Str(f, "sha256") << "\n";
      }
      return;
    }
    auto data = ctx.Api().DownloadFile(from.id, from.path);
    if (!data.ok()) return ctx.Fail(data.status());
    if (Status s = WriteLocal(to.path, from.path, *data); !s.ok()) return ctx.Fail(s);
  });

  cmd = sandbox->add_subcommand("snapshots", "list your snapshots, newest first, and the bytes they hold");
  cmd->callback([&ctx] {
    auto v = ctx.Api().JsonCall("GET", "/v1/sandboxes/snapshots");
    if (!v.ok()) return ctx.Fail(v.status());
    if (ctx.json) {
      std::cout << json::serialize(*v) << "\n";
      return;
    }
    const json::object* answer = v->is_object() ? &v->as_object() : nullptr;
    const json::array* list = answer ? json_fields::ArrayField(*answer, "snapshots") : nullptr;
    // One line per snapshot: id, source sandbox, data bytes, created; then the total.
    for (const auto& s : list ? *list : json::array{}) {
      if (!s.is_object()) continue;
      const json::object& snap = s.as_object();
      const std::string source = Str(snap, "source_sandbox");
      std::cout << Str(snap, "id") << "  " << (source.empty() ? "-" : source) << "  "
                << json_fields::UintField(snap, "data_bytes") << " bytes  "
                << FormatTime(static_cast<int64_t>(json_fields::UintField(snap, "created_unix_ms"))) << " UTC\n";
    }
    if (answer != nullptr) {
      const uint64_t quota = json_fields::UintField(*answer, "quota_bytes");
      std::cout << "total " << json_fields::UintField(*answer, "owner_bytes") << " bytes"
                << (quota == 0 ? "" : " of " + std::to_string(quota)) << "\n";
    }
  });

  auto rmsnap_ids = std::make_shared<std::vector<std::string>>();
  cmd = sandbox->add_subcommand("rmsnap", "delete snapshots");
  cmd->add_option("ids", *rmsnap_ids, "snapshot ids (snap-...)")->required();
  cmd->callback([&ctx, rmsnap_ids] {
    ctx.DeleteEach("/v1/sandboxes/snapshots", *rmsnap_ids);
  });

  AddSimpleVerb(*sandbox, ctx, "snapshot", "snapshot a sandbox's files; prints the snapshot id");
  AddSimpleVerb(*sandbox, ctx, "pause", "pause a sandbox (its memory and CPU go back to the host)");
  AddSimpleVerb(*sandbox, ctx, "resume", "resume a paused sandbox");
}

}  // namespace sinew::cli
