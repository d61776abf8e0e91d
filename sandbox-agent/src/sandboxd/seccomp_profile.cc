#include "sandboxd/seccomp_profile.h"

#include <errno.h>
#include <sched.h>

namespace sinew::sandbox {

namespace json = boost::json;

json::object SeccompProfile(bool gvisor) {
  json::array denied;
  for (const char* name : {"mount",
                           "umount",
                           "umount2",
                           "pivot_root",
                           "move_mount",
                           "open_tree",
                           "fsopen",
                           "fsconfig",
                           "fsmount",
                           "fspick",
                           "mount_setattr",
                           "ptrace",
                           "process_vm_readv",
                           "process_vm_writev",
                           "kcmp",
                           "pidfd_getfd",
                           "kexec_load",
                           "kexec_file_load",
                           "bpf",
                           "perf_event_open",
                           "keyctl",
                           "add_key",
                           "request_key",
                           "init_module",
                           "finit_module",
                           "delete_module",
                           "create_module",
                           "reboot",
                           "swapon",
                           "swapoff",
                           "acct",
                           "settimeofday",
                           "clock_settime",
                           "clock_adjtime",
                           "adjtimex",
                           "syslog",
                           "iopl",
                           "ioperm",
                           "lookup_dcookie",
                           "quotactl",
                           "quotactl_fd",
                           "nfsservctl",
                           "open_by_handle_at",
                           "name_to_handle_at",
                           "vhangup",
                           "get_kernel_syms",
                           "query_module",
                           "uselib",
                           "_sysctl",
                           "ustat",
                           "sysfs",
                           "unshare",
                           "setns",
                           "userfaultfd",
                           "io_uring_setup",
                           "io_uring_enter",
                           "io_uring_register",
                           "fanotify_init",
                           "chroot"}) {
    denied.emplace_back(name);
  }
  json::array rules;
  rules.push_back(
      json::object{{"names", denied}, {"action", "SCMP_ACT_ERRNO"}, {"errnoRet", EPERM}});
  // Scheduling may be changed for the caller itself (pid 0: nice, chrt, taskset), not for
  // another process: the agent's effective uid is the sandbox user's, so Linux would let
  // the sandbox starve it (renice, SCHED_IDLE, one CPU). The pid is argument 0, or 1 after
  // a "which".
  for (auto [names, index] :
       {std::pair{json::array{"sched_setscheduler", "sched_setparam", "sched_setattr",
                              "sched_setaffinity"},
                  0},
        std::pair{json::array{"setpriority", "ioprio_set"}, 1}}) {
    rules.push_back(json::object{
        {"names", names},
        {"action", "SCMP_ACT_ERRNO"},
        {"errnoRet", EPERM},
        {"args", json::array{json::object{{"index", index}, {"value", 0}, {"op", "SCMP_CMP_NE"}}}}});
  }
  if (!gvisor) {
    rules.push_back(json::object{
        {"names", json::array{"clone3"}}, {"action", "SCMP_ACT_ERRNO"}, {"errnoRet", ENOSYS}});
  }
  rules.push_back(json::object{{"names", json::array{"clone"}},
                               {"action", "SCMP_ACT_ERRNO"},
                               {"errnoRet", EPERM},
                               {"args", json::array{json::object{{"index", 0},
                                                                 {"value", CLONE_NEWUSER},
                                                                 {"valueTwo", CLONE_NEWUSER},
                                                                 {"op", "SCMP_CMP_MASKED_EQ"}}}}});
  return {{"defaultAction", "SCMP_ACT_ALLOW"},
          {"architectures", json::array{"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"}},
          {"syscalls", rules}};
}

}  // namespace sinew::sandbox
