// SandboxApi: file upload and download (PUT and GET /v1/sandboxes/{id}/files?path=...;
// docs/sandbox-api.md, "Files"). The harness holds a file whole on its way (an upload
// arrives within max_request_bytes, a download is answered whole, at most as large) and
// passes it to or from the sandbox's agent in chunks; the agent resolves the path inside
// the container, below the workspace, never through a link that leaves it, and writes
// all or nothing (sandbox-agent/src/agent/file_transfer.h).
#include <filesystem>

#include "api_sandboxes.h"
#include "sinew/sandbox/sandbox_client.h"
#include "sinew/utf8.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;

// The sandbox's workspace: every sandbox of sinew-sandboxd has it there (docs/sandbox.md).
const std::filesystem::path kWorkspace = "/workspace";
constexpr size_t kMaxPathBytes = 4096;

// The `path` query parameter, checked before anything is called: absolute, or relative
// to the workspace; below the workspace once normalised (no `..` out of it). The agent
// checks again inside the sandbox, where links are resolved.
Result<std::string> FilePath(const std::string& query) {
  bool present = false;
  const std::string raw = QueryParam(query, "path", &present);
  if (!present || raw.empty()) {
    return Status::InvalidArgument("the query parameter path is required (a file below " +
                                   kWorkspace.string() + ")");
  }
  if (raw.size() > kMaxPathBytes || raw.find('\0') != std::string::npos || SanitizeUtf8(raw) != raw) {
    return Status::InvalidArgument("path must be UTF-8 of at most " + std::to_string(kMaxPathBytes) +
                                   " bytes without NUL");
  }
  std::filesystem::path p(raw);
  if (p.is_relative()) p = kWorkspace / p;
  p = p.lexically_normal();
  const std::filesystem::path rel = p.lexically_relative(kWorkspace);
  if (rel.empty() || *rel.begin() == ".." || rel == ".") {
    return Status::InvalidArgument("path '" + raw + "' is not below the workspace " +
                                   kWorkspace.string() + "; files move only below it");
  }
  std::string out = p.string();
  if (!out.empty() && out.back() == '/') {
    return Status::InvalidArgument("path '" + raw + "' names a directory, not a file");
  }
  return out;
}

// The agent's refusal of a transfer, as the caller's mistake; nullopt for a failure of
// the sandbox itself.
std::optional<ApiResponse> TransferRefusal(const Status& s, uint64_t limit) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      return ApiHandler::Error(400, "invalid_argument", s.message());
    case StatusCode::kNotFound:
      return ApiHandler::Error(404, "not_found", s.message());
    case StatusCode::kResourceExhausted:
      return ApiHandler::Error(413, "payload_too_large",
                               s.message() + " (this harness moves files of at most " +
                                   std::to_string(limit) + " bytes: max_request_bytes)");
    default:
      return std::nullopt;
  }
}

}  // namespace

ApiResponse SandboxApi::Upload(const ApiRequest& r, const std::string& id, const std::string& query,
                               const Caller& caller) {
  auto record = records_.Get(id, caller.tenant);
  if (!record.ok()) return ApiHandler::FromStatus(record.status());
  if (!r.content_type.empty() && r.content_type.rfind("application/octet-stream", 0) != 0) {
    return ApiHandler::Error(415, "unsupported_media_type",
                             "send the file as Content-Type: application/octet-stream");
  }
  auto path = FilePath(query);
  if (!path.ok()) return ApiHandler::FromStatus(path.status());
  if (auto refused = NotReady(*record)) return *refused;
  // Written before the file is: no change leaves no trace.
  const std::string detail = "path " + *path + " " + std::to_string(r.body.size()) + " bytes";
  if (Status s = Audit(r, caller, id, "sandbox_upload", detail); !s.ok()) return ApiHandler::FromStatus(s);
  auto client = ClientFor(*record);
  Result<v1::WriteFileResult> written =
      client.ok() ? (*client)->WriteFile(*path, r.body) : Result<v1::WriteFileResult>(client.status());
  if (!written.ok()) {
    if (auto refused = TransferRefusal(written.status(), deps_.config->max_request_bytes)) return *refused;
    return Unreachable(*record, written.status());
  }
  ApiResponse out;
  out.status = 201;
  out.body = json::serialize(json::object{
      {"file", json::object{{"path", written->path()}, {"size", written->size()}, {"sha256", written->sha256()}}}});
  return out;
}

ApiResponse SandboxApi::Download(const ApiRequest& r, const std::string& id, const std::string& query,
                                 const Caller& caller) {
  auto record = records_.Get(id, caller.tenant);
  if (!record.ok()) return ApiHandler::FromStatus(record.status());
  auto path = FilePath(query);
  if (!path.ok()) return ApiHandler::FromStatus(path.status());
  if (auto refused = NotReady(*record)) return *refused;
  const uint64_t limit = deps_.config->max_request_bytes;
  auto client = ClientFor(*record);
  Result<std::string> data = client.ok() ? (*client)->ReadFile(*path, limit) : Result<std::string>(client.status());
  if (!data.ok()) {
    if (auto refused = TransferRefusal(data.status(), limit)) return *refused;
    return Unreachable(*record, data.status());
  }
  // Written before the bytes are answered: nothing leaves without a trace.
  const std::string detail = "path " + *path + " " + std::to_string(data->size()) + " bytes";
  if (Status s = Audit(r, caller, id, "sandbox_download", detail); !s.ok()) return ApiHandler::FromStatus(s);
  ApiResponse out;
  out.content_type = "application/octet-stream";
  out.body = std::move(data).value();
  return out;
}

}  // namespace sinew::harness
