#include "sinew/harness/config.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "api_keys.h"
#include "approvals.h"
#include "webhook_url.h"
#include "sinew/grpc_tls.h"
#include "sinew/http/server.h"
#include "sinew/json_fields.h"
#include "sinew/log.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;
using json_fields::ParseObject;
using json_fields::ReadArray;
using json_fields::ReadBool;
using json_fields::ReadNumber;
using json_fields::ReadObject;
using json_fields::ReadString;
using json_fields::ReadUint;
using json_fields::ReadUint32;
using json_fields::RejectUnknownKeys;

// "replicas": ["http://a:8081/v1", ...] (distinct, http or https) and
// "replica_load_factor"; replicas stand in for base_url, on "openai" and "anthropic" models.
Status ParseReplicas(const json::object& o, const std::string& where, ModelEndpointConfig* m) {
  SINEW_RETURN_IF_ERROR(
      ReadNumber(o, "replica_load_factor", where, 1.0, 100.0, &m->replica_load_factor));
  SINEW_RETURN_IF_ERROR(ReadUint32(o, "replica_min_in_flight", where, &m->replica_min_in_flight));
  SINEW_RETURN_IF_ERROR(ReadString(o, "replica_policy", where, &m->replica_policy));
  SINEW_RETURN_IF_ERROR(ReadUint32(o, "replica_health_check_ms", where, &m->replica_health_check_ms));
  SINEW_RETURN_IF_ERROR(ReadString(o, "replica_health_path", where, &m->replica_health_path));
  if (m->replica_health_check_ms != 0 && m->replica_health_check_ms < 100) {
    return Status::InvalidArgument(where + ".replica_health_check_ms must be 0 (off) or at least 100");
  }
  if (m->replica_health_path.empty() || m->replica_health_path[0] != '/' ||
      m->replica_health_path.find_first_of(" \r\n#?") != std::string::npos) {
    return Status::InvalidArgument(where + ".replica_health_path must be a path starting with '/'");
  }
  if (m->replica_policy != "session" && m->replica_policy != "round_robin") {
    return Status::InvalidArgument(where + ".replica_policy must be \"session\" or \"round_robin\"");
  }
  const json::array* list = nullptr;
  SINEW_RETURN_IF_ERROR(ReadArray(o, "replicas", where, &list));
  if (list == nullptr) return Status::Ok();
  if (list->empty()) return Status::InvalidArgument(where + ".replicas must not be empty");
  if (!m->base_url.empty()) {
    return Status::InvalidArgument(where + ": set base_url or replicas, not both");
  }
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string at = where + ".replicas[" + std::to_string(i) + "]";
    if (!(*list)[i].is_string()) return Status::InvalidArgument(at + " must be a string");
    std::string url((*list)[i].as_string());
    if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
      return Status::InvalidArgument(at + " must be an http:// or https:// URL");
    }
    if (std::find(m->replicas.begin(), m->replicas.end(), url) != m->replicas.end()) {
      return Status::InvalidArgument(at + " repeats " + url);
    }
    m->replicas.push_back(std::move(url));
  }
  return Status::Ok();
}

Status ParseModel(const std::string& name, const json::object& o, ModelEndpointConfig* m) {
  const std::string where = "config.models." + name;
  SINEW_RETURN_IF_ERROR(RejectUnknownKeys(
      o,
      "kind,base_url,replicas,replica_load_factor,replica_min_in_flight,replica_policy,replica_health_check_ms,"
      "replica_health_path,model,api_key_secret,ca_file,script,"
      "context_tokens,max_output_tokens,timeout_seconds,max_retries,backoff_ms,tools,stream,"
      "reasoning_in_history",
      where));
  SINEW_RETURN_IF_ERROR(ReadString(o, "kind", where, &m->kind));
  SINEW_RETURN_IF_ERROR(ReadString(o, "base_url", where, &m->base_url));
  SINEW_RETURN_IF_ERROR(ParseReplicas(o, where, m));
  m->model = name;
  SINEW_RETURN_IF_ERROR(ReadString(o, "model", where, &m->model));
  SINEW_RETURN_IF_ERROR(ReadString(o, "api_key_secret", where, &m->api_key_secret));
  SINEW_RETURN_IF_ERROR(ReadString(o, "ca_file", where, &m->ca_file));
  SINEW_RETURN_IF_ERROR(ReadString(o, "script", where, &m->script));
  SINEW_RETURN_IF_ERROR(ReadUint32(o, "context_tokens", where, &m->context_tokens));
  SINEW_RETURN_IF_ERROR(ReadUint32(o, "max_output_tokens", where, &m->max_output_tokens));
  SINEW_RETURN_IF_ERROR(ReadUint32(o, "timeout_seconds", where, &m->timeout_seconds));
  SINEW_RETURN_IF_ERROR(ReadUint32(o, "max_retries", where, &m->max_retries));
  SINEW_RETURN_IF_ERROR(ReadUint32(o, "backoff_ms", where, &m->backoff_ms));
  SINEW_RETURN_IF_ERROR(ReadBool(o, "tools", where, &m->tools));
  SINEW_RETURN_IF_ERROR(ReadString(o, "stream", where, &m->stream));
  SINEW_RETURN_IF_ERROR(ReadBool(o, "reasoning_in_history", where, &m->reasoning_in_history));
  if (m->stream != "auto" && m->stream != "on" && m->stream != "off") {
    return Status::InvalidArgument(where + ".stream must be \"auto\", \"on\" or \"off\"");
  }
  if (m->kind != "openai" && m->kind != "anthropic" && m->kind != "scripted") {
    return Status::InvalidArgument(where + ".kind must be \"openai\", \"anthropic\" or \"scripted\"");
  }
  if (!m->replicas.empty() && m->kind == "scripted") {
    return Status::InvalidArgument(where + ".replicas is for kind \"openai\" and \"anthropic\" models only");
  }
  if (m->kind == "scripted" && m->script.empty()) {
    return Status::InvalidArgument(where + ".script is required for a scripted model");
  }
  if (m->kind != "scripted" && m->base_url.empty() && m->replicas.empty()) {
    return Status::InvalidArgument(where + ".base_url is required for kind " + m->kind);
  }
  if (m->context_tokens < 256) {
    return Status::InvalidArgument(where + ".context_tokens must be at least 256");
  }
  return Status::Ok();
}

// config.grpc_tls and config.etcd_tls (`where`): {"cert_file", "key_file", "ca_file",
// "server_name", "refresh_seconds"}.
Status ParseGrpcTls(const json::object& o, const std::string& where, GrpcTlsOptions* tls) {
  SINEW_RETURN_IF_ERROR(RejectUnknownKeys(o, "cert_file,key_file,ca_file,server_name,refresh_seconds", where));
  SINEW_RETURN_IF_ERROR(ReadString(o, "cert_file", where, &tls->cert_file));
  SINEW_RETURN_IF_ERROR(ReadString(o, "key_file", where, &tls->key_file));
  SINEW_RETURN_IF_ERROR(ReadString(o, "ca_file", where, &tls->ca_file));
  SINEW_RETURN_IF_ERROR(ReadString(o, "server_name", where, &tls->server_name_override));
  uint32_t refresh = static_cast<uint32_t>(tls->refresh_interval.count());
  SINEW_RETURN_IF_ERROR(ReadUint32(o, "refresh_seconds", where, &refresh));
  if (refresh == 0) return Status::InvalidArgument(where + ".refresh_seconds must be at least 1");
  tls->refresh_interval = std::chrono::seconds(refresh);
  if (tls->cert_file.empty() || tls->key_file.empty() || tls->ca_file.empty()) {
    return Status::InvalidArgument(where + " needs cert_file, key_file and ca_file");
  }
  return Status::Ok();
}

Status ParseTenantQuota(const std::string& where, const json::object& o, TenantQuotaConfig* q) {
  SINEW_RETURN_IF_ERROR(RejectUnknownKeys(
      o,
      "max_concurrent_sessions,max_sandboxes,tokens_per_minute,requests_per_second,approvals,max_api_sandboxes,"
      "sandbox_creations_per_minute,sandbox_memory_bytes,sandbox_cpu_millis,snapshot_bytes,webhook_allow_private,"
      "webhook_allow",
      where));
  SINEW_RETURN_IF_ERROR(ReadUint32(o, "max_concurrent_sessions", where, &q->max_concurrent_sessions));
  SINEW_RETURN_IF_ERROR(ReadUint32(o, "max_sandboxes", where, &q->max_sandboxes));
  SINEW_RETURN_IF_ERROR(ReadUint32(o, "max_api_sandboxes", where, &q->max_api_sandboxes));
  SINEW_RETURN_IF_ERROR(ReadUint32(o, "sandbox_creations_per_minute", where, &q->sandbox_creations_per_minute));
  SINEW_RETURN_IF_ERROR(ReadUint(o, "sandbox_memory_bytes", where, UINT64_MAX / 2, &q->sandbox_memory_bytes));
  SINEW_RETURN_IF_ERROR(ReadUint(o, "sandbox_cpu_millis", where, UINT64_MAX / 2, &q->sandbox_cpu_millis));
  SINEW_RETURN_IF_ERROR(ReadUint(o, "snapshot_bytes", where, UINT64_MAX / 2, &q->snapshot_bytes));
  SINEW_RETURN_IF_ERROR(ReadUint(o, "tokens_per_minute", where, UINT64_MAX / 2, &q->tokens_per_minute));
  SINEW_RETURN_IF_ERROR(
      ReadNumber(o, "requests_per_second", where, 0.0, 1e6, &q->requests_per_second));
  if (const json::value* approvals = o.if_contains("approvals"); approvals != nullptr && !approvals->is_null()) {
    SINEW_ASSIGN_OR_RETURN(ApprovalPolicy policy, ParseApprovalPolicy(*approvals, where + ".approvals"));
    q->approvals_json = json::serialize(ApprovalPolicyToJson(policy));
  }
  SINEW_RETURN_IF_ERROR(ReadBool(o, "webhook_allow_private", where, &q->webhook_allow_private));
  const json::array* allow = nullptr;
  SINEW_RETURN_IF_ERROR(ReadArray(o, "webhook_allow", where, &allow));
  if (allow != nullptr) {
    for (size_t i = 0; i < allow->size(); ++i) {
      const std::string w = where + ".webhook_allow[" + std::to_string(i) + "]";
      if (!(*allow)[i].is_string()) return Status::InvalidArgument(w + " must be a string");
      const std::string entry((*allow)[i].as_string());
      SINEW_RETURN_IF_ERROR(CheckWebhookAllowEntry(entry, w));
      q->webhook_allow.push_back(entry);
    }
  }
  return Status::Ok();
}

}  // namespace

Status AddBuiltinAgents(HarnessConfig* config) {
  for (const auto& [name, kind] : {std::pair{kOracleModel, kBuiltinOracleKind}, std::pair{kNopModel, kBuiltinNopKind}}) {
    auto it = config->models.find(name);
    if (it != config->models.end() && it->second.kind == kind) continue;
    if (it != config->models.end()) {
      return Status::InvalidArgument(std::string("config.models.") + name +
                                     ": the name is reserved for a built-in agent; choose another");
    }
    ModelEndpointConfig m;
    m.kind = kind;
    m.model = name;
    m.tools = std::string(kind) == kBuiltinOracleKind;
    m.context_tokens = 1u << 20;  // no window: the prompt is the command
    m.max_retries = 0;
    config->models[name] = m;
  }
  return Status::Ok();
}

namespace {

// The top level's plain fields (listen, threads, timeouts, log_format, ...).
Status ParseTopLevel(const json::object& root, HarnessConfig* c) {
  const std::string where = "config";
  SINEW_RETURN_IF_ERROR(ReadString(root, "listen", where, &c->listen));
  SINEW_RETURN_IF_ERROR(ReadString(root, "advertise_url", where, &c->advertise_url));
  SINEW_RETURN_IF_ERROR(ReadString(root, "default_model", where, &c->default_model));
  SINEW_RETURN_IF_ERROR(ReadUint32(root, "lease_ttl_ms", where, &c->lease_ttl_ms));
  SINEW_RETURN_IF_ERROR(ReadUint32(root, "scan_interval_ms", where, &c->scan_interval_ms));
  SINEW_RETURN_IF_ERROR(
      ReadUint32(root, "schedule_min_interval_seconds", where, &c->schedule_min_interval_seconds));
  if (c->schedule_min_interval_seconds == 0 || c->schedule_min_interval_seconds > 86400) {
    return Status::InvalidArgument("config.schedule_min_interval_seconds must be from 1 to 86400");
  }
  SINEW_RETURN_IF_ERROR(ReadUint32(root, "workers", where, &c->workers));
  SINEW_RETURN_IF_ERROR(ReadUint32(root, "max_sessions_driven", where, &c->max_sessions_driven));
  SINEW_RETURN_IF_ERROR(ReadUint(root, "max_request_bytes", where, 1u << 30, &c->max_request_bytes));
  SINEW_RETURN_IF_ERROR(ReadUint32(root, "read_timeout_seconds", where, &c->read_timeout_seconds));
  SINEW_RETURN_IF_ERROR(ReadUint32(root, "max_connections", where, &c->max_connections));
  SINEW_RETURN_IF_ERROR(ReadUint32(root, "api_threads", where, &c->api_threads));
  SINEW_RETURN_IF_ERROR(ReadBool(root, "insecure", where, &c->insecure));
  SINEW_RETURN_IF_ERROR(ReadString(root, "log_format", where, &c->log_format));
  if (auto f = logging::ParseLogFormat(c->log_format); !f.ok()) return f.status().WithContext("config.log_format");
  return Status::Ok();
}

// config.store: {"address", "dir", "etcd", "durability"}.
Status ParseStore(const json::object& root, HarnessConfig* c) {
  const json::object* s = nullptr;
  SINEW_RETURN_IF_ERROR(ReadObject(root, "store", "config", &s));
  if (s == nullptr) return Status::Ok();
  SINEW_RETURN_IF_ERROR(RejectUnknownKeys(*s, "address,dir,etcd,durability", "config.store"));
  SINEW_RETURN_IF_ERROR(ReadString(*s, "address", "config.store", &c->store_address));
  SINEW_RETURN_IF_ERROR(ReadString(*s, "etcd", "config.store", &c->store_etcd));
  SINEW_RETURN_IF_ERROR(ReadString(*s, "dir", "config.store", &c->store_dir));
  SINEW_RETURN_IF_ERROR(ReadString(*s, "durability", "config.store", &c->store_durability));
  return Status::Ok();
}

// config.sandboxd: {"address" or "etcd", "provision_timeout_seconds"}.
Status ParseSandboxd(const json::object& root, HarnessConfig* c) {
  const json::object* s = nullptr;
  SINEW_RETURN_IF_ERROR(ReadObject(root, "sandboxd", "config", &s));
  if (s == nullptr) return Status::Ok();
  SINEW_RETURN_IF_ERROR(RejectUnknownKeys(*s, "address,etcd,provision_timeout_seconds", "config.sandboxd"));
  SINEW_RETURN_IF_ERROR(ReadString(*s, "address", "config.sandboxd", &c->sandboxd_address));
  SINEW_RETURN_IF_ERROR(ReadString(*s, "etcd", "config.sandboxd", &c->sandboxd_etcd));
  SINEW_RETURN_IF_ERROR(ReadUint32(*s, "provision_timeout_seconds", "config.sandboxd",
                                   &c->sandbox_provision_timeout_seconds));
  if (c->sandbox_provision_timeout_seconds == 0 || c->sandbox_provision_timeout_seconds > 86400) {
    return Status::InvalidArgument("config.sandboxd.provision_timeout_seconds must be in [1, 86400]");
  }
  if (!c->sandboxd_address.empty() && !c->sandboxd_etcd.empty()) {
    return Status::InvalidArgument("config.sandboxd: give either address (one sinew-sandboxd) or etcd "
                                   "(sandbox hosts registered there), not both");
  }
  if (!c->sandboxd_etcd.empty() && c->sandboxd_etcd.find(':') == std::string::npos) {
    return Status::InvalidArgument("config.sandboxd.etcd must be host:port (got '" + c->sandboxd_etcd + "')");
  }
  return Status::Ok();
}

// config.tls (the REST listener's certificate), config.grpc_tls and config.etcd_tls. Comes
// after the store and sandboxd sections: etcd_tls needs an etcd among them.
Status ParseTls(const json::object& root, HarnessConfig* c) {
  const json::object* t = nullptr;
  SINEW_RETURN_IF_ERROR(ReadObject(root, "tls", "config", &t));
  if (t != nullptr) {
    SINEW_RETURN_IF_ERROR(RejectUnknownKeys(*t, "cert_file,key_file,ca_file", "config.tls"));
    SINEW_RETURN_IF_ERROR(ReadString(*t, "cert_file", "config.tls", &c->tls.cert_file));
    SINEW_RETURN_IF_ERROR(ReadString(*t, "key_file", "config.tls", &c->tls.key_file));
    SINEW_RETURN_IF_ERROR(ReadString(*t, "ca_file", "config.tls", &c->tls.ca_file));
  }
  const json::object* g = nullptr;
  SINEW_RETURN_IF_ERROR(ReadObject(root, "grpc_tls", "config", &g));
  if (g != nullptr) {
    SINEW_RETURN_IF_ERROR(ParseGrpcTls(*g, "config.grpc_tls", &c->grpc_tls));
  }
  SINEW_RETURN_IF_ERROR(ReadObject(root, "etcd_tls", "config", &g));
  if (g != nullptr) {
    SINEW_RETURN_IF_ERROR(ParseGrpcTls(*g, "config.etcd_tls", &c->etcd_tls));
    if (c->store_etcd.empty() && c->sandboxd_etcd.empty()) {
      return Status::InvalidArgument("config.etcd_tls is set but no etcd is configured (store.etcd or sandboxd.etcd)");
    }
  }
  return Status::Ok();
}

// config.api_keys ({"key": "tenant"}), config.api_keys_file and config.tenants (quotas).
Status ParseTenancy(const json::object& root, HarnessConfig* c) {
  const json::object* keys = nullptr;
  SINEW_RETURN_IF_ERROR(ReadObject(root, "api_keys", "config", &keys));
  if (keys != nullptr) {
    for (const auto& kv : *keys) {
      if (!kv.value().is_string() || kv.value().as_string().empty()) {
        return Status::InvalidArgument("config.api_keys values must be tenant names");
      }
      c->api_keys[std::string(kv.key())] = std::string(kv.value().as_string());
    }
  }
  SINEW_RETURN_IF_ERROR(ReadString(root, "api_keys_file", "config", &c->api_keys_file));
  SINEW_RETURN_IF_ERROR(ParseKeyTable(c->api_keys, true, "config.api_keys", nullptr).status());
  const json::object* tenants = nullptr;
  SINEW_RETURN_IF_ERROR(ReadObject(root, "tenants", "config", &tenants));
  if (tenants != nullptr) {
    for (const auto& kv : *tenants) {
      const std::string tw = "config.tenants." + std::string(kv.key());
      if (!kv.value().is_object()) return Status::InvalidArgument(tw + " must be an object");
      SINEW_RETURN_IF_ERROR(ParseTenantQuota(tw, kv.value().as_object(), &c->tenants[std::string(kv.key())]));
    }
  }
  return Status::Ok();
}

// config.models: {"name": {model}, ...} (ParseModel).
Status ParseModels(const json::object& root, HarnessConfig* c) {
  const json::object* models = nullptr;
  SINEW_RETURN_IF_ERROR(ReadObject(root, "models", "config", &models));
  if (models == nullptr) return Status::Ok();
  for (const auto& kv : *models) {
    if (!kv.value().is_object()) {
      return Status::InvalidArgument("config.models." + std::string(kv.key()) + " must be an object");
    }
    ModelEndpointConfig m;
    SINEW_RETURN_IF_ERROR(ParseModel(std::string(kv.key()), kv.value().as_object(), &m));
    c->models[std::string(kv.key())] = m;
  }
  return Status::Ok();
}

// config.secrets: {"name": {"value"} or {"env"}}; an "env" is read now.
Status ParseSecrets(const json::object& root, HarnessConfig* c) {
  const json::object* secrets = nullptr;
  SINEW_RETURN_IF_ERROR(ReadObject(root, "secrets", "config", &secrets));
  if (secrets == nullptr) return Status::Ok();
  for (const auto& kv : *secrets) {
    std::string name(kv.key());
    const std::string sw = "config.secrets." + name;
    if (!kv.value().is_object()) return Status::InvalidArgument(sw + " must be {\"value\"} or {\"env\"}");
    const auto& so = kv.value().as_object();
    SINEW_RETURN_IF_ERROR(RejectUnknownKeys(so, "value,env", sw));
    std::string value, env;
    SINEW_RETURN_IF_ERROR(ReadString(so, "value", sw, &value));
    SINEW_RETURN_IF_ERROR(ReadString(so, "env", sw, &env));
    if (!env.empty()) {
      const char* v = std::getenv(env.c_str());
      if (v == nullptr) {
        return Status::NotFound(sw + " reads environment variable " + env + ", which is not set");
      }
      value = v;
    }
    if (value.empty()) return Status::InvalidArgument(sw + " is empty");
    c->secrets[name] = value;
  }
  return Status::Ok();
}

// config.http_request: {"allow": [{"host", "secret", "header", "prefix"}, ...]}.
Status ParseHttpRequestTool(const json::object& root, HarnessConfig* c) {
  const json::object* http_request = nullptr;
  SINEW_RETURN_IF_ERROR(ReadObject(root, "http_request", "config", &http_request));
  if (http_request == nullptr) return Status::Ok();
  SINEW_RETURN_IF_ERROR(RejectUnknownKeys(*http_request, "allow", "config.http_request"));
  const json::array* allow = nullptr;
  SINEW_RETURN_IF_ERROR(ReadArray(*http_request, "allow", "config.http_request", &allow));
  for (size_t index = 0; allow != nullptr && index < allow->size(); ++index) {
    const std::string ew = json_fields::IndexPath("config.http_request.allow", index);
    if (!(*allow)[index].is_object()) return Status::InvalidArgument(ew + " must be an object");
    const auto& eo = (*allow)[index].as_object();
    SINEW_RETURN_IF_ERROR(RejectUnknownKeys(eo, "host,secret,header,prefix", ew));
    HttpAllowEntry e;
    SINEW_RETURN_IF_ERROR(ReadString(eo, "host", ew, &e.host));
    SINEW_RETURN_IF_ERROR(ReadString(eo, "secret", ew, &e.secret));
    SINEW_RETURN_IF_ERROR(ReadString(eo, "header", ew, &e.header));
    SINEW_RETURN_IF_ERROR(ReadString(eo, "prefix", ew, &e.prefix));
    if (e.host.empty()) return Status::InvalidArgument(ew + ".host is required");
    for (auto& ch : e.host) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    c->http_allow.push_back(e);
  }
  return Status::Ok();
}

// config.limits: {"max_turns", "max_output_tokens", "max_wall_seconds"}.
Status ParseLimits(const json::object& root, HarnessConfig* c) {
  const json::object* limits = nullptr;
  SINEW_RETURN_IF_ERROR(ReadObject(root, "limits", "config", &limits));
  if (limits == nullptr) return Status::Ok();
  SINEW_RETURN_IF_ERROR(
      RejectUnknownKeys(*limits, "max_turns,max_output_tokens,max_wall_seconds", "config.limits"));
  SINEW_RETURN_IF_ERROR(ReadUint32(*limits, "max_turns", "config.limits", &c->limits.max_turns));
  SINEW_RETURN_IF_ERROR(ReadUint(*limits, "max_output_tokens", "config.limits", UINT64_MAX,
                                 &c->limits.max_output_tokens));
  SINEW_RETURN_IF_ERROR(
      ReadUint32(*limits, "max_wall_seconds", "config.limits", &c->limits.max_wall_seconds));
  return Status::Ok();
}

// What the sections must say together: one store, at least one key and model, a default
// model that exists (the built-in agents added), secrets that are named exist, and the
// process's limits and listener in range.
Status CheckWhole(HarnessConfig* c) {
  if (!c->store_address.empty() + !c->store_dir.empty() + !c->store_etcd.empty() != 1) {
    return Status::InvalidArgument(
        "config.store needs exactly one of \"address\" (sinew-store), \"dir\" (embedded) or \"etcd\" (store "
        "shards)");
  }
  if (c->store_durability != "sync" && c->store_durability != "async") {
    return Status::InvalidArgument("config.store.durability must be \"sync\" or \"async\"");
  }
  if (c->api_keys.empty() && c->api_keys_file.empty()) {
    return Status::InvalidArgument("config.api_keys must map at least one key to a tenant (or name an api_keys_file)");
  }
  if (c->models.empty()) return Status::InvalidArgument("config.models must name at least one model");
  if (c->default_model.empty()) c->default_model = c->models.begin()->first;
  SINEW_RETURN_IF_ERROR(AddBuiltinAgents(c));
  if (!c->models.count(c->default_model)) {
    return Status::InvalidArgument("config.default_model '" + c->default_model + "' is not in config.models");
  }
  for (const auto& [name, m] : c->models) {
    if (!m.api_key_secret.empty() && !c->secrets.count(m.api_key_secret)) {
      return Status::InvalidArgument("config.models." + name + ".api_key_secret names unknown secret '" +
                                     m.api_key_secret + "'");
    }
  }
  for (const auto& e : c->http_allow) {
    if (!e.secret.empty() && !c->secrets.count(e.secret)) {
      return Status::InvalidArgument("config.http_request.allow host " + e.host + " names unknown secret '" +
                                     e.secret + "'");
    }
  }
  if (c->lease_ttl_ms < 300) return Status::InvalidArgument("config.lease_ttl_ms must be at least 300");
  if (c->workers == 0 || c->workers > 10000)
    return Status::InvalidArgument("config.workers must be from 1 to 10000 (threads for blocking calls)");
  if (c->api_threads == 0 || c->api_threads > 4096)
    return Status::InvalidArgument("config.api_threads must be from 1 to 4096 (threads for REST requests)");
  if (c->max_sessions_driven == 0 || c->max_sessions_driven > 1000000)
    return Status::InvalidArgument("config.max_sessions_driven must be from 1 to 1000000");
  if (c->tls.cert_file.empty() != c->tls.key_file.empty())
    return Status::InvalidArgument("config.tls needs both cert_file and key_file (or neither)");
  const auto colon = c->listen.rfind(':');
  SINEW_RETURN_IF_ERROR(http::CheckPlainOnlyOnLoopback(colon == std::string::npos ? c->listen : c->listen.substr(0, colon),
                                                       !c->tls.cert_file.empty(), c->insecure, "config.insecure"));
  if (c->read_timeout_seconds == 0) return Status::InvalidArgument("config.read_timeout_seconds must be at least 1");

  return CheckAdvertiseUrl(c->advertise_url, "config.advertise_url");
}

// config.webhooks (WebhooksConfig).
Status ParseWebhooks(const json::object& root, HarnessConfig* c) {
  const json::object* o = nullptr;
  SINEW_RETURN_IF_ERROR(ReadObject(root, "webhooks", "config", &o));
  if (o == nullptr) return Status::Ok();
  const std::string where = "config.webhooks";
  SINEW_RETURN_IF_ERROR(
      RejectUnknownKeys(*o, "retry_initial_ms,retry_max_ms,retry_for_seconds,poll_ms,timeout_ms", where));
  WebhooksConfig& w = c->webhooks;
  SINEW_RETURN_IF_ERROR(ReadUint32(*o, "retry_initial_ms", where, &w.retry_initial_ms));
  SINEW_RETURN_IF_ERROR(ReadUint32(*o, "retry_max_ms", where, &w.retry_max_ms));
  SINEW_RETURN_IF_ERROR(ReadUint32(*o, "retry_for_seconds", where, &w.retry_for_seconds));
  SINEW_RETURN_IF_ERROR(ReadUint32(*o, "poll_ms", where, &w.poll_ms));
  SINEW_RETURN_IF_ERROR(ReadUint32(*o, "timeout_ms", where, &w.timeout_ms));
  if (w.retry_initial_ms == 0 || w.retry_max_ms < w.retry_initial_ms) {
    return Status::InvalidArgument(where + ".retry_initial_ms must be at least 1 and at most retry_max_ms");
  }
  if (w.retry_for_seconds == 0) return Status::InvalidArgument(where + ".retry_for_seconds must be at least 1");
  if (w.poll_ms < 10 || w.poll_ms > 600000) return Status::InvalidArgument(where + ".poll_ms must be from 10 to 600000");
  if (w.timeout_ms < 100) return Status::InvalidArgument(where + ".timeout_ms must be at least 100");
  return Status::Ok();
}

}  // namespace

Result<HarnessConfig> ParseConfig(const std::string& json_text) {
  SINEW_ASSIGN_OR_RETURN(json::object root, ParseObject(json_text, "config"));
  SINEW_RETURN_IF_ERROR(RejectUnknownKeys(
      root,
      "listen,advertise_url,store,sandboxd,api_keys,models,default_model,secrets,http_request,"
      "limits,lease_ttl_ms,scan_interval_ms,workers,max_sessions_driven,max_request_bytes,read_timeout_seconds,"
      "max_connections,api_threads,tls,insecure,grpc_tls,etcd_tls,log_format,api_keys_file,tenants,webhooks,"
      "schedule_min_interval_seconds",
      "config"));
  HarnessConfig c;
  // In this order: the errors of an earlier section come first, and ParseTls reads what
  // ParseStore and ParseSandboxd set.
  for (Status (*section)(const json::object&, HarnessConfig*) :
       {ParseTopLevel, ParseStore, ParseSandboxd, ParseTls, ParseTenancy, ParseModels, ParseSecrets,
        ParseHttpRequestTool, ParseLimits, ParseWebhooks}) {
    SINEW_RETURN_IF_ERROR(section(root, &c));
  }
  SINEW_RETURN_IF_ERROR(CheckWhole(&c));
  return c;
}

Status CheckAdvertiseUrl(const std::string& url, const std::string& where) {
  if (url.empty()) return Status::Ok();
  const bool scheme = url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0;
  const size_t host = url.find("://") + 3;
  if (!scheme || url.size() <= host || url.find('/', host) != std::string::npos || url.size() > 1024 ||
      url.find_first_of(" \t\r\n\"'<>") != std::string::npos) {
    return Status::InvalidArgument(where + " must be http://HOST[:PORT] or https://HOST[:PORT] (no path), not '" +
                                   url + "'");
  }
  return Status::Ok();
}

Result<HarnessConfig> LoadConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read config file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto parsed = ParseConfig(ss.str());
  if (!parsed.ok()) return parsed.status().WithContext(path);
  // The certificate files are read now, so that a wrong one stops the start with its name.
  if (Status files = CheckGrpcTlsFiles(parsed->grpc_tls); !files.ok()) return files.WithContext(path);
  if (Status files = CheckGrpcTlsFiles(parsed->etcd_tls); !files.ok()) {
    return files.WithContext(path + ": etcd_tls");
  }
  return parsed;
}

}  // namespace sinew::harness
