// HarnessConfig: everything a sinew-harness process needs, read from one JSON file
// (docs/harness.md lists every field). The harness keeps no other state.
//
// Thread-safety: a HarnessConfig is a plain value; share it read-only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sinew/grpc_tls_options.h"
#include "sinew/status.h"

namespace sinew::harness {

// One model the harness can call, by the name a task gives in "model".
struct ModelEndpointConfig {
  // "openai" (Chat Completions), "anthropic" (Messages) or "scripted" (replays a file);
  // "builtin-oracle" and "builtin-nop" are the built-in agents' (not configurable).
  std::string kind = "scripted";
  // Base URL, e.g. "http://127.0.0.1:8081/v1" (".../chat/completions" or ".../messages"
  // is appended). Unused for "scripted".
  std::string base_url;
  // "openai" and "anthropic", instead of base_url: the base URLs of several servers of the same
  // model. Each session's calls go to one of them (its home, by consistent hashing of
  // the session id) while it is up and under the load bound; a replica that fails is
  // skipped for a while (src/replica_router.h, docs/scale-out.md). Default: none
  std::vector<std::string> replicas;
  // How far over the average a replica's calls in flight may go before calls move on.
  // Default: 1.25
  double replica_load_factor = 1.25;
  // Calls in flight a replica takes before the load bound applies. Default: 4
  uint32_t replica_min_in_flight = 4;
  // "session" (the rule above) or "round_robin" (each call to the next replica that is
  // up: the baseline for measuring the prefix cache). Default: "session"
  std::string replica_policy = "session";
  // With replicas: how often each one's health is checked (GET <origin><path>, 2 s
  // timeout; an answer under 500 other than 429 passes), so that a dead or loading
  // replica is skipped before a session's call finds it and is back once it answers.
  // 0 turns the checks off. Default: 5000 ms
  uint32_t replica_health_check_ms = 5000;
  // The path checked on each replica's origin (scheme://host:port). Default: "/health"
  // (sinew-model, llama-server, vLLM and SGLang all answer it)
  std::string replica_health_path = "/health";
  // The model name sent on the wire. Default: the config key.
  std::string model;
  // Name of a vault secret holding the API key, or "" for none.
  std::string api_key_secret;
  // PEM CA bundle trusted for an https base_url. Default: the system's
  std::string ca_file;
  // "scripted" only: the JSON file of responses to replay.
  std::string script;
  // The model's context size in tokens; the prompt view is windowed to fit. Default: 8192
  uint32_t context_tokens = 8192;
  // Default max output tokens per call. Default: 1024
  uint32_t max_output_tokens = 1024;
  // Whole-call timeout. Default: 300 s
  uint32_t timeout_seconds = 300;
  // Retries on 429/5xx/transport errors, with exponential backoff from backoff_ms.
  // Default: 4 retries, 200 ms
  uint32_t max_retries = 4;
  uint32_t backoff_ms = 200;
  // Whether the model takes tool definitions (a server that refuses "tools", like a
  // small completion model, gets none and simply answers). Default: true
  bool tools = true;
  // Streaming: "on" (always stream; a server that refuses fails the call), "off" (never),
  // or "auto": stream until the server refuses streaming (an HTTP 400/422/500/501 whose
  // message names "stream", e.g. llama-server's "Cannot use tools with stream"), then
  // repeat that call at once without streaming and call this model without streaming
  // from then on (logged once). Default: "auto"
  std::string stream = "auto";
  // Send each earlier answer's reasoning back with it, as `reasoning_content`, for a chat
  // template that renders it (one that keeps thinking across tool calls). Otherwise the
  // reasoning stays in the event log only and the model sees answers alone. Default: false
  bool reasoning_in_history = false;
};

// A host the proxy tool `http_request` may reach, with an optional credential injected.
struct HttpAllowEntry {
  std::string host;          // "host" or "host:port", compared exactly (lower case)
  std::string secret;        // vault secret to inject, "" for none
  std::string header = "Authorization";
  std::string prefix = "Bearer ";
};

struct LimitsConfig {
  uint32_t max_turns = 50;              // Default: 50
  uint64_t max_output_tokens = 200000;  // Default: 200000 (sum over the session)
  uint32_t max_wall_seconds = 3600;     // Default: 3600
};

// TLS on the REST API (docs/security.md). Both files empty: plain HTTP.
struct TlsConfig {
  std::string cert_file;  // PEM certificate chain; reloaded on change and on SIGHUP
  std::string key_file;   // PEM private key
  // CA bundle trusted when this harness calls another harness over https (forwarding).
  // Default: the system's
  std::string ca_file;
};

// One tenant's quotas (config.tenants; docs/security.md, "Tenant quotas"). 0 is unlimited,
// and so is every quota of a tenant the config does not name.
struct TenantQuotaConfig {
  // Queued or running sessions of the tenant (counted in the store) at create, fork and
  // import; one more is answered 429. Default: 0 (unlimited)
  uint32_t max_concurrent_sessions = 0;
  // Sessions of the tenant holding a sandbox through one harness; the tool call that would
  // need one more fails with a tool error. Default: 0 (unlimited)
  uint32_t max_sandboxes = 0;
  // Sandboxes of the sandbox API (/v1/sandboxes) the tenant holds at once, not deleted,
  // counted in the store (every harness sees them); one more is answered 429.
  // Default: 0 (unlimited)
  uint32_t max_api_sandboxes = 0;
  // Sandboxes the tenant creates through /v1/sandboxes (create and fork) in a sliding
  // minute, counted in the store; over it 429. Default: 0 (unlimited)
  uint32_t sandbox_creations_per_minute = 0;
  // Guaranteed memory (memory_bytes, defaults included) of the tenant's /v1/sandboxes
  // sandboxes that are ready (paused ones hold none), counted in the store; a create,
  // fork or resume over it is answered 429. Default: 0 (unlimited)
  uint64_t sandbox_memory_bytes = 0;
  // CPU (cpu_millis, defaults included) of the same sandboxes, as sandbox_memory_bytes.
  // Default: 0 (unlimited)
  uint64_t sandbox_cpu_millis = 0;
  // Bytes of the tenant's sandbox snapshots (sinew-sandboxd's owner_bytes, summed over
  // its hosts); a snapshot, fork or pause while they reach it is answered 429.
  // Default: 0 (unlimited)
  uint64_t snapshot_bytes = 0;
  // Model tokens (prompt + completion) of the tenant's sessions in a sliding minute, per
  // harness; over it new sessions get 429 and model calls wait. Default: 0 (unlimited)
  uint64_t tokens_per_minute = 0;
  // Authenticated /v1/sessions requests per second, per harness (a token bucket of one
  // second's worth, at least 1); over it 429. Default: 0 (unlimited)
  double requests_per_second = 0;
  // The tenant's default tool approval policy (docs/harness.md, "Tool approvals"), as
  // normalized JSON, for sessions whose task names none. Default: "" (every call allowed)
  std::string approvals_json;
  // Webhook endpoints of the tenant may point at loopback, private, link-local and
  // reserved addresses (docs/harness.md, "Webhooks"). Default: false
  bool webhook_allow_private = false;
  // Host names, IP addresses and CIDRs its webhooks may point at even though private.
  // Default: none
  std::vector<std::string> webhook_allow;
};

// config.webhooks: how deliveries are retried and sent (docs/harness.md, "Webhooks").
struct WebhooksConfig {
  // The first retry's wait; each later one doubles, up to retry_max_ms. Default: 5000
  uint32_t retry_initial_ms = 5000;
  // Default: 3600000 (1 h)
  uint32_t retry_max_ms = 3600000;
  // How long after its event a delivery is tried before it is marked failed.
  // Default: 86400 (24 h)
  uint32_t retry_for_seconds = 86400;
  // How often the outbox and the endpoints are read. Default: 1000
  uint32_t poll_ms = 1000;
  // One delivery's whole-request limit (at most a third of lease_ttl_ms is used). Default: 3000
  uint32_t timeout_ms = 3000;
};

// config.sandboxd.provision_timeout_seconds when absent.
inline constexpr uint32_t kDefaultSandboxProvisionTimeoutSeconds = 600;

struct HarnessConfig {
  // REST address. Default: 127.0.0.1:8080 (port 0: any free port)
  std::string listen = "127.0.0.1:8080";
  // The address other harnesses use to forward requests for sessions this one drives.
  // Default: "http://" + the bound listen address.
  std::string advertise_url;
  // Remote store (sinew-store) address, an embedded store directory, or the etcd
  // (host:port) holding the store shard map (docs/scale-out.md): exactly one.
  std::string store_address;
  std::string store_dir;
  std::string store_etcd;
  // sinew-sandboxd address; "" disables sandbox tools (unless sandboxd_etcd is set).
  std::string sandboxd_address;
  // Instead of one address: the etcd (host:port) where sandbox hosts register; sandboxes
  // are placed over them (docs/scale-out.md). At most one of the two. Default: ""
  std::string sandboxd_etcd;
  // How long a provision may wait for its sandbox (in the host's start line when many
  // sessions want one at once) before the tool call fails. Default: 600
  uint32_t sandbox_provision_timeout_seconds = kDefaultSandboxProvisionTimeoutSeconds;
  // Bearer API key -> tenant: "sha256:<hex of the key's SHA-256>" -> tenant, or (still
  // accepted, with a warning) the plaintext key -> tenant (docs/security.md).
  std::map<std::string, std::string> api_keys;
  // A JSON file of more keys, hashed only ({"sha256:<hex>": tenant}), re-read when it
  // changes: keys rotate without a restart. Default: "" (none)
  std::string api_keys_file;
  // Tenant name -> its quotas; a tenant not named here has none.
  std::map<std::string, TenantQuotaConfig> tenants;
  std::map<std::string, ModelEndpointConfig> models;
  std::string default_model;
  // Secret name -> value (resolved from "value" or "env" at load time).
  std::map<std::string, std::string> secrets;
  std::vector<HttpAllowEntry> http_allow;
  LimitsConfig limits;
  // Lease time-to-live; renewed every third of it. Default: 10000 ms
  uint32_t lease_ttl_ms = 10000;
  // How often the harness looks for queued/running sessions nobody drives, and for
  // schedules whose next fire time has come. Default: 2000 ms
  uint32_t scan_interval_ms = 2000;
  // The shortest time a schedule's cron may leave between two fire times; a denser one
  // (six fields with seconds) is refused (docs/harness.md, "Schedules"). 1 to 86,400.
  // Default: 60 s
  uint32_t schedule_min_interval_seconds = 60;
  // Threads for the calls of driven sessions that block: model servers over HTTP, HTTP
  // tools, sandbox provisioning and execution (docs/harness.md). A session waiting on the
  // scripted model or a timer holds none; one of these calls holds one while it runs, so
  // this bounds how many such calls run at once. 1 to 10,000. Default: 64
  uint32_t workers = 64;
  // Sessions driven at once (each a coroutine: its frame and its log in memory); more
  // wait in a queue. 1 to 1,000,000. Default: 10,000
  uint32_t max_sessions_driven = 10000;
  // Largest request body. Default: 1 MiB
  uint64_t max_request_bytes = 1u << 20;
  // Read timeout on every connection (headers and body). Default: 30 s
  uint32_t read_timeout_seconds = 30;
  // Open connections at most; more are answered 503. Default: 2048
  uint32_t max_connections = 2048;
  // Threads for ordinary REST requests (every request but event streams: their store
  // calls and forwarding block); more wait in a queue. Requests forwarded from another
  // harness run on a second pool of a quarter as many (at least 2), so that two
  // harnesses forwarding to each other never wait on each other. 1 to 4096. Default: 32
  uint32_t api_threads = 32;
  TlsConfig tls;
  // mTLS on the gRPC links to sinew-store and sinew-sandboxd (docs/security.md): this
  // harness's client certificate and key, and the CA their certificates must chain to.
  // Default: none (plain gRPC)
  GrpcTlsOptions grpc_tls{};
  // TLS to etcd (store.etcd, sandboxd.etcd) with this harness's client certificate and
  // the CA etcd's certificate must chain to (etcd's --client-cert-auth). Default: plain
  GrpcTlsOptions etcd_tls{};
  // Allow plain HTTP on a non-loopback `listen` (without it such a config is refused).
  // Default: false
  bool insecure = false;
  // Durability of an embedded store: "sync" or "async". Default: "sync"
  std::string store_durability = "sync";
  // Log lines: "text" (for people) or "json" (JSON lines; docs/logging.md); the
  // command line's --log-format overrides it. Default: "text"
  std::string log_format = "text";
  WebhooksConfig webhooks;
};

// The built-in agents: models every harness offers under these reserved names, with no
// model server behind them (docs/harness.md, "Built-in agents"):
//  - "oracle" runs the session's prompt as one `bash` tool call in the session's sandbox,
//    with the session's max_wall_seconds as the command's timeout, then ends its turn.
//    The call and its result are ordinary tool_call / tool_result events. A task for it
//    needs a sandboxd (and `bash` among its tools when it lists tools).
//  - "nop" ends its turn at once, without a tool call.
inline constexpr const char* kOracleModel = "oracle";
inline constexpr const char* kNopModel = "nop";
inline constexpr const char* kBuiltinOracleKind = "builtin-oracle";
inline constexpr const char* kBuiltinNopKind = "builtin-nop";

// Adds the built-in agents to config->models (again is harmless). kInvalidArgument when
// the config names one of its own models with a reserved name.
[[nodiscard]] Status AddBuiltinAgents(HarnessConfig* config);

// Parses a config document (the built-in agents added). Errors name the offending field (kInvalidArgument) or the
// missing environment variable of a secret (kNotFound).
[[nodiscard]] Result<HarnessConfig> ParseConfig(const std::string& json_text);
// Reads and parses a file.
[[nodiscard]] Result<HarnessConfig> LoadConfig(const std::string& path);

// OK when `url` is empty or http(s)://HOST[:PORT] without a path: what other harnesses are
// sent to (the lease's holder_url). `where` names the setting in the error.
[[nodiscard]] Status CheckAdvertiseUrl(const std::string& url, const std::string& where);

}  // namespace sinew::harness
