// The seccomp profile of every sandbox: allow by default, refuse (EPERM) the system
// calls that administer the machine or cross the sandbox's walls (mount, ptrace,
// kexec, bpf, keyctl, module loading, namespaces, ...). clone3 answers ENOSYS so that
// libc falls back to clone, whose CLONE_NEWUSER flag is refused.
// For gVisor (`gvisor`), whose kernel applies the profile itself (runsc --oci-seccomp):
// runsc answers every refused call with EPERM whatever the rule's errnoRet, and EPERM
// from clone3 would stop libc from making threads, so there is no clone3 rule; gVisor's
// kernel answers clone3 with ENOSYS itself.
// Thread-safety: a pure function.
#pragma once

#include <boost/json.hpp>

namespace sinew::sandbox {

boost::json::object SeccompProfile(bool gvisor);

}  // namespace sinew::sandbox
