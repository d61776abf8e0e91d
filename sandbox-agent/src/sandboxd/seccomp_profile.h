// The seccomp profile of every sandbox: allow by default, refuse (EPERM) the system
// calls that administer the machine or cross the sandbox's walls (mount, ptrace,
// kexec, bpf, keyctl, module loading, namespaces, ...). clone3 answers ENOSYS so that
// libc falls back to clone, whose CLONE_NEWUSER flag is refused.
#pragma once

#include <boost/json.hpp>

namespace sinew::sandbox {

boost::json::object SeccompProfile();

}  // namespace sinew::sandbox
