// The one rule for a sandbox request's unset fields, shared by sinew-sandboxd (which
// provisions) and the harness's placement (which must know what a request will reserve).
#pragma once

#include "sinew/proto/sandbox.pb.h"

namespace sinew::sandbox {

// The request's zero / empty fields filled from `defaults` (proto/sandbox.proto: "zero /
// empty fields take the daemon's defaults"). A zero memory guarantee becomes the memory
// limit, or the default guarantee when that is set and smaller; an empty runtime is
// the default's, else "runc". Does not check ranges.
v1::Resources FillResourceDefaults(const v1::Resources& requested, const v1::Resources& defaults);

}  // namespace sinew::sandbox
