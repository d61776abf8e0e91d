// The web console (docs/console.md): its files are compiled into the binary from
// harness/ui (embed_assets.cmake) and served under /ui/ with no API key; every data call
// the page makes goes through the public /v1 API with the key the user typed.
//
// Thread-safety: everything here is immutable after static initialisation.
#pragma once

#include <cstddef>
#include <string_view>

#include "api_handler.h"

namespace sinew::harness {

struct UiFile {
  const char* name;  // path under harness/ui, e.g. "app.js"
  const unsigned char* data;
  size_t size;
};
// Defined in the generated ui_assets_data.cc.
extern const UiFile kUiFiles[];
extern const size_t kUiFileCount;
extern const char kUiBuildId[];  // 12 hex digits naming this set of files

// True for /ui and every path below /ui/.
bool IsUiPath(std::string_view path);

// Answers a request for a /ui path (IsUiPath):
//   /ui                      308 to /ui/
//   /ui/, /ui/index.html     the page (its asset URLs carry the build id), no-cache
//   /ui/<build id>/<file>    a file; cached for a year when the id is this build's,
//                            no-cache when it is another's (the current bytes are served)
//   anything else            404; a method other than GET: 405
// Every answer carries a strict Content-Security-Policy and nosniff.
ApiResponse ServeUi(const ApiRequest& request);

}  // namespace sinew::harness
