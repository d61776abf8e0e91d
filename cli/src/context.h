// Context: what every `sinew` command shares: where the server is, the API key, output
// mode, and the exit code the command chose.
//
// Exit codes (documented in docs/cli.md):
//   0 ok / session completed, 1 session failed or store damaged, 2 usage or API error,
//   3 session cancelled, 4 session stopped by a limit.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "sinew/client/api_client.h"
#include "render.h"

namespace sinew::cli {

// The REST client the commands use (client/, shared with evaluation runs).
using client::ApiClient;
using client::ParseEvent;
using client::SessionView;

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitError = 2;
inline constexpr int kExitCancelled = 3;
inline constexpr int kExitLimit = 4;

struct Context {
  std::string server;   // flag > SINEW_SERVER > config file > http://127.0.0.1:8080
  std::string api_key;  // flag > SINEW_API_KEY > config file
  std::string ca_file;  // CA bundle for an https server: flag > SINEW_CA_FILE > config file
  std::string config_path;
  bool json = false;        // --json: machine-readable output, one JSON value per line
  bool color = false;       // stdout is a terminal and NO_COLOR is unset
  bool interactive = false; // stderr is a terminal: progress messages
  bool full = false;        // --full: do not fold long outputs
  int exit_code = kExitOk;

  // Resolves server and key from the environment and config file (after flag parsing).
  void Resolve();
  ApiClient Api() const { return ApiClient(server, api_key, ca_file); }
  RenderOptions Render() const {
    RenderOptions o;
    o.color = color;
    o.full = full;
    return o;
  }
  // Prints "error: ..." to stderr and sets exit_code (2 unless given).
  void Fail(const Status& s, int code = kExitError);
  // DELETE `collection` + "/" + id for each id, printing "<id>  deleted" (--json: the
  // server's answer); a refused one is reported by Fail and the rest still go.
  void DeleteEach(const std::string& collection, const std::vector<std::string>& ids);
};

// Follows a session's events (SSE, reconnecting with Last-Event-ID) until it ends;
// returns the exit code for how it ended.
int FollowSession(Context& ctx, const std::string& id, uint64_t after);

void AddSessionCommands(CLI::App& app, Context& ctx);  // run, tail, sessions, cancel, message
void AddHistoryCommands(CLI::App& app, Context& ctx);  // replay, fork, export, import
void AddStoreCommands(CLI::App& app, Context& ctx);    // store inspect, store backup
void AddEvalCommands(CLI::App& app, Context& ctx);     // eval run, resume, report
void AddKeyCommands(CLI::App& app, Context& ctx);      // hash-key
void AddSandboxCommands(CLI::App& app, Context& ctx);  // sandbox create, ls, show, exec, rm, ...
void AddWebhookCommands(CLI::App& app, Context& ctx);  // webhook create, ls, rm, deliveries
void AddScheduleCommands(CLI::App& app, Context& ctx);  // schedule create, ls, show, pause, resume, rm

}  // namespace sinew::cli
