// The Sandbox service's file transfer (ReadFile, WriteFile of proto/sandbox.proto): raw
// bytes of regular files below the workspace, in chunks. Paths follow write_file's rule
// (tool_input.h ResolvePath with inside_workspace, then beneath.h), for reads too: a
// path outside the workspace, or through a link that leaves it, is refused, as are
// directories, fifos, sockets and devices (opened O_NONBLOCK, so a fifo never blocks).
// Refusals are kInvalidArgument (never kPermissionDenied, which callers read as a
// sandbox that is not the one they asked for), a missing file kNotFound, a file over
// the cap or a full workspace kResourceExhausted.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "agent/tool.h"
#include "sinew/proto/sandbox.pb.h"
#include "sinew/status.h"

namespace sinew::sandbox {

// Bytes of file data per FileChunk.
inline constexpr size_t kFileChunkBytes = 1 << 20;

// Sends the file `raw_path` as chunks to `send` (false: the receiver has gone; the read
// stops). `max_bytes` 0 means config.max_transfer_bytes; a larger one is lowered to it.
// Refusals come before any chunk is sent; a file that grows past `max_bytes` while read
// ends with kResourceExhausted after some chunks.
[[nodiscard]] Status SendFile(const ToolConfig& config, const std::string& raw_path,
                              uint64_t max_bytes,
                              const std::function<bool(const v1::FileChunk&)>& send);

// Writes the file the chunks from `next` describe (next(&chunk) false: no more), all or
// nothing (beneath.h PendingFile). At most config.max_transfer_bytes.
[[nodiscard]] Result<v1::WriteFileResult> ReceiveFile(
    const ToolConfig& config, const std::function<bool(v1::FileChunk*)>& next);

}  // namespace sinew::sandbox
