// ServeUi: the console's files from the table compiled into the binary.
#include "ui_assets.h"

#include <string>

namespace sinew::harness {
namespace {

// Scripts and styles only from this origin, data only from the API of this origin, no
// inline script or style, no framing, and DOM sinks that take strings refused (the page
// builds its DOM node by node).
constexpr char kContentSecurityPolicy[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
    "require-trusted-types-for 'script'";

const UiFile* FindFile(std::string_view name) {
  for (size_t i = 0; i < kUiFileCount; ++i) {
    if (name == kUiFiles[i].name) return &kUiFiles[i];
  }
  return nullptr;
}

std::string ContentTypeOf(std::string_view name) {
  auto ends = [&](std::string_view ext) {
    return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".json")) return "application/json";
  return "application/octet-stream";
}

ApiResponse WithSecurityHeaders(ApiResponse r) {
  r.headers.emplace_back("Content-Security-Policy", kContentSecurityPolicy);
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("Cross-Origin-Opener-Policy", "same-origin");
  return r;
}

// The console's refusals are the API's JSON errors (with the console's headers), so
// every 4xx of the harness has one shape.
ApiResponse Refusal(int status, const std::string& code, const std::string& message) {
  ApiResponse r = ApiHandler::Error(status, code, message);
  r.headers.emplace_back("Cache-Control", "no-store");
  return WithSecurityHeaders(std::move(r));
}

// The page, with its asset URLs pointing at this build's folder.
ApiResponse IndexPage() {
  const UiFile* index = FindFile("index.html");
  if (index == nullptr) return Refusal(404, "not_found", "this harness was built without the console");
  std::string page(reinterpret_cast<const char*>(index->data), index->size);
  const std::string marker = "{{BUILD}}";
  for (size_t at = page.find(marker); at != std::string::npos; at = page.find(marker, at)) {
    page.replace(at, marker.size(), kUiBuildId);
  }
  ApiResponse r;
  r.content_type = ContentTypeOf("index.html");
  r.body = std::move(page);
  r.headers.emplace_back("Cache-Control", "no-cache");
  return WithSecurityHeaders(std::move(r));
}

}  // namespace

bool IsUiPath(std::string_view path) { return path == "/ui" || path.rfind("/ui/", 0) == 0; }

ApiResponse ServeUi(const ApiRequest& request) {
  const std::string_view target(request.target);
  const std::string_view path = target.substr(0, target.find('?'));
  if (request.method != "GET") {
    ApiResponse r = Refusal(405, "method_not_allowed", request.method + " is not allowed on the console; use GET");
    r.headers.emplace_back("Allow", "GET");
    return r;
  }
  if (path == "/ui") {
    ApiResponse r;
    r.status = 308;
    r.content_type = "text/plain; charset=utf-8";
    r.body = "the console is at /ui/\n";
    r.headers.emplace_back("Cache-Control", "no-store");
    r = WithSecurityHeaders(std::move(r));
    r.headers.emplace_back("Location", "/ui/");
    return r;
  }
  const std::string_view rest = path.substr(4);  // after "/ui/"
  if (rest.empty() || rest == "index.html") return IndexPage();
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return Refusal(404, "not_found", "no console file " + std::string(path));
  const std::string_view build = rest.substr(0, slash);
  const std::string_view name = rest.substr(slash + 1);
  const UiFile* file = name == "index.html" ? nullptr : FindFile(name);
  if (file == nullptr) return Refusal(404, "not_found", "no console file " + std::string(path));
  ApiResponse r;
  r.content_type = ContentTypeOf(name);
  r.body.assign(reinterpret_cast<const char*>(file->data), file->size);
  r.headers.emplace_back("Cache-Control",
                         build == kUiBuildId ? "public, max-age=31536000, immutable" : "no-cache");
  return WithSecurityHeaders(std::move(r));
}

}  // namespace sinew::harness
