// SocketBinder: under gVisor, the agent's socket is a host unix socket (runsc
// --host-uds=create), and gVisor's checkpoint cannot save a host socket, bound or
// connected. Around a checkpoint the agent closes its socket and every connection, and
// binds a new one afterwards; the directory the socket lives in is root's, and the agent
// has given up root. The binder is a small process forked as root before the agent drops
// its privileges: it keeps uid 0 (no capabilities; the sandbox user's processes can
// neither signal nor trace it) and does only this, when the agent asks over a socket pair
// (which gVisor saves with the rest of the sandbox) once it has closed every socket:
//
//   1. looks the socket's path up: the host removed the file when it asked the agent to
//      close, and gVisor lets go of the host socket it kept for the path only once a
//      lookup sees the file gone;
//   2. writes the file `quiet` beside it: the host checkpoints from then on;
//   3. waits for the file `listen` there, which the host writes once the sandbox runs
//      again (the one checkpointed, or one restored from the image, in its own
//      directory): "sandbox id\nsecret\n", the identity to serve under from then on (a
//      restored copy has its own); the host removes both files again;
//   4. binds a new socket at the same path (mode 0600) and hands the bound descriptor and
//      the identity to the agent.
//
// Thread-safety: Rebind is called by one thread at a time.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <utility>

#include "sinew/status.h"
#include "util/unique_fd.h"

namespace sinew::sandbox {

struct AgentIdentity {
  std::string sandbox_id;
  std::string secret;
};

class SocketBinder {
 public:
  // Forks the binder. Call as root, before any thread starts and before dropping
  // privileges. `socket_path`: the agent's socket; its directory holds `listen`.
  [[nodiscard]] static Result<SocketBinder> Start(const std::string& socket_path);

  // Asks for steps 1 to 4 above and waits (without limit: a checkpoint may take any
  // time, and a restore may come much later) for the new bound socket.
  [[nodiscard]] Result<std::pair<UniqueFd, AgentIdentity>> Rebind();

  int channel_fd() const { return channel_.get(); }

 private:
  explicit SocketBinder(UniqueFd channel) : channel_(std::move(channel)) {}
  UniqueFd channel_;
};

// Parses "sandbox id\nsecret\n" (the `listen` file). kInvalidArgument when malformed.
[[nodiscard]] Result<AgentIdentity> ParseIdentity(std::string_view text);

}  // namespace sinew::sandbox
