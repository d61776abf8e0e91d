// sinew: the command-line interface of the Sinew platform. See docs/cli.md.
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>

#include "context.h"
#include "sinew/json_fields.h"

namespace sinew::cli {

void Context::Resolve() {
  if (config_path.empty()) {
    if (const char* env = std::getenv("SINEW_CONFIG")) {
      config_path = env;
    } else if (const char* home = std::getenv("HOME")) {
      config_path = std::string(home) + "/.config/sinew/cli.json";
    }
  }
  std::string file_server, file_key, file_ca;
  if (!config_path.empty()) {
    std::ifstream in(config_path);
    if (in) {
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      boost::system::error_code ec;
      boost::json::value v = boost::json::parse(text, ec);
      if (ec || !v.is_object()) {
        std::cerr << "warning: ignoring " << config_path << ": not a JSON object\n";
      } else {
        const auto& o = v.as_object();
        file_server = sinew::json_fields::StringField(o, "server");
        file_key = sinew::json_fields::StringField(o, "api_key");
        file_ca = sinew::json_fields::StringField(o, "ca_file");
      }
    }
  }
  if (server.empty()) {
    const char* env = std::getenv("SINEW_SERVER");
    server = env ? env : (!file_server.empty() ? file_server : "http://127.0.0.1:8080");
  }
  if (api_key.empty()) {
    const char* env = std::getenv("SINEW_API_KEY");
    api_key = env ? env : file_key;
  }
  if (ca_file.empty()) {
    const char* env = std::getenv("SINEW_CA_FILE");
    ca_file = env ? env : file_ca;
  }
  if (server.find("://") == std::string::npos) server = "http://" + server;
  color = !json && isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr;
  interactive = isatty(STDERR_FILENO);
}

void Context::Fail(const Status& s, int code) {
  std::cerr << "error: " << s.message() << "\n";
  exit_code = code;
}

void Context::DeleteEach(const std::string& collection, const std::vector<std::string>& ids) {
  for (const auto& id : ids) {
    auto v = Api().JsonCall("DELETE", collection + "/" + id);
    if (!v.ok()) {
      Fail(v.status());
      continue;
    }
    if (json) {
      std::cout << boost::json::serialize(*v) << "\n";
    } else {
      std::cout << id << "  deleted\n";
    }
  }
}

// Puts the options that every command takes (those of `app` itself, which subcommands
// inherit) in the --help of every command below `app`: CLI11 lists only a command's own.
void ListGlobalOptionsInEveryHelp(CLI::App& app) {
  std::string text = "Options every command takes (before or after it):\n";
  for (const CLI::Option* opt : app.get_options()) {
    if (opt == app.get_help_ptr()) continue;
    std::string name = opt->get_name();
    if (opt->get_type_size() != 0) name += " " + opt->get_type_name();
    name.resize(std::max<size_t>(name.size() + 1, 28), ' ');  // CLI11's column
    text += "  " + name + opt->get_description() + "\n";
  }
  std::function<void(CLI::App&)> each = [&](CLI::App& parent) {
    for (CLI::App* sub : parent.get_subcommands({})) {
      sub->footer(text);
      each(*sub);
    }
  };
  each(app);
}

}  // namespace sinew::cli

int main(int argc, char** argv) {
  sinew::cli::Context ctx;
  CLI::App app{"sinew: submit, follow, replay and debug Sinew agent sessions"};
  app.require_subcommand(1);
  app.add_option("--server", ctx.server, "harness URL (env SINEW_SERVER; default http://127.0.0.1:8080)");
  app.add_option("--api-key", ctx.api_key, "API key (env SINEW_API_KEY)");
  app.add_option("--config", ctx.config_path,
                 "config file with {\"server\", \"api_key\"} (env SINEW_CONFIG; default "
                 "~/.config/sinew/cli.json)");
  app.add_option("--ca-file", ctx.ca_file, "CA bundle trusted for an https server (env SINEW_CA_FILE)");
  app.add_flag("--json", ctx.json, "machine-readable output (JSON, one value per line)");
  app.add_flag("--full", ctx.full, "show long outputs whole instead of folded");
  app.parse_complete_callback([&ctx] { ctx.Resolve(); });
  // Global flags may come after the subcommand too (`sinew tail ID --json`, as
  // docs/cli.md writes them): subcommands made below inherit this.
  app.fallthrough();
  sinew::cli::AddSessionCommands(app, ctx);
  sinew::cli::AddHistoryCommands(app, ctx);
  sinew::cli::AddStoreCommands(app, ctx);
  sinew::cli::AddKeyCommands(app, ctx);
  sinew::cli::AddSandboxCommands(app, ctx);
  sinew::cli::AddWebhookCommands(app, ctx);
  sinew::cli::AddScheduleCommands(app, ctx);
  sinew::cli::AddEvalCommands(app, ctx);
  sinew::cli::ListGlobalOptionsInEveryHelp(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // `sinew bogus`: name the unknown command rather than "A subcommand is required".
    if (app.get_subcommands().empty()) {
      for (const std::string& arg : app.remaining()) {
        if (arg.empty() || arg[0] == '-') continue;
        std::string known;
        for (const CLI::App* sub : app.get_subcommands({})) known += (known.empty() ? "" : ", ") + sub->get_name();
        std::cerr << "error: unknown command '" << arg << "' (commands: " << known << ")\n";
        return sinew::cli::kExitError;
      }
    }
    int rc = app.exit(e);
    return rc == 0 ? 0 : sinew::cli::kExitError;
  }
  return ctx.exit_code;
}
