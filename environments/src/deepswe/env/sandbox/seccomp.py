"""The grading sandbox's seccomp profile: user namespaces, and nothing else they could be used for.

Why: the reference harnesses (SWE-bench's, R2E-Gym's) run a task's tests as root, and some tests
depend on it: aiohttp's static-file tests chmod a file to 000 and still read it. Our tests run as
an unprivileged tester (grading/tester.py), so that the code under test cannot write the grader's
files or reach root's processes. A user namespace gives both at once: in it the tester is uid 0
with root's powers over the files it owns (their uid maps into the namespace) and over nothing
else (root's files, processes and descriptors are outside it). Docker's default seccomp profile
refuses `unshare(CLONE_NEWUSER)` to a container without CAP_SYS_ADMIN, so grading sandboxes run
with this profile instead (SandboxLimits.user_namespaces, set by for_grading).

Docker's default profile is an allow-list built into the daemon, which no API returns. This one
is written here, the other way round: every system call is allowed but
- a namespace other than a user namespace (unshare or clone with a mount, PID, network, IPC,
  UTS, cgroup or time flag; setns; clone3, whose flags seccomp cannot read: ENOSYS, so the C
  library falls back to clone): a user namespace owns no mount namespace, so root in it mounts
  nothing;
- mounting and changing root (mount and the new mount API, pivot_root, chroot): a test process
  that could chroot would open the graded files' paths in a tree of its own;
- the kernel's shared state and surfaces no test needs: keyrings, BPF, perf events,
  userfaultfd, io_uring, file handles (open_by_handle_at read host files from containers once),
  modules, kexec, reboot, swap, the clocks, accounting, quotas, syslog, host and domain names,
  I/O ports.
Each of these fails with EPERM (the errno a process without the privilege gets). A name this
kernel or libseccomp does not know is skipped by the daemon. What this profile does not do that
Docker's does: refuse a system call added to Linux after this list was written.
"""

from __future__ import annotations

import json

# Namespace flags (linux/sched.h). CLONE_NEWUSER (0x10000000) is the one allowed.
_NAMESPACES = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
# Only unshare reads it: in clone's first argument these bits are the exit signal.
_CLONE_NEWTIME = 0x00000080
EPERM, ENOSYS = 1, 38

REFUSED = (  # noqa: SIM905
    # namespaces and mounts
    "setns mount umount umount2 pivot_root chroot move_mount open_tree fsopen fsconfig "
    "fsmount fspick mount_setattr "
    # the kernel's shared state and surfaces
    "add_key keyctl request_key bpf perf_event_open userfaultfd io_uring_setup io_uring_enter "
    "io_uring_register name_to_handle_at open_by_handle_at fanotify_init lookup_dcookie "
    "init_module finit_module delete_module create_module get_kernel_syms query_module "
    "kexec_load kexec_file_load reboot swapon swapoff acct quotactl quotactl_fd syslog "
    "sethostname setdomainname settimeofday stime clock_settime clock_adjtime adjtimex "
    "iopl ioperm vm86 vm86old nfsservctl uselib ustat sysfs _sysctl vhangup"
).split()


def _flag_rule(name: str, flag: int) -> dict:
    """Refuse `name` when its first argument has `flag` set."""
    arg = {"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}
    return {"names": [name], "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM, "args": [arg]}


def grader_profile() -> dict:
    """The profile, as Docker's seccomp JSON."""
    rules = [
        {"names": list(REFUSED), "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM},
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS},
    ]
    for flag in _NAMESPACES.values():
        rules += [_flag_rule("unshare", flag), _flag_rule("clone", flag)]
    rules.append(_flag_rule("unshare", _CLONE_NEWTIME))
    return {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": rules}


def security_opt() -> str:
    """The profile as a `docker run --security-opt` value (the engine takes the JSON inline)."""
    return "seccomp=" + json.dumps(grader_profile(), separators=(",", ":"))


__all__ = ["REFUSED", "grader_profile", "security_opt"]
