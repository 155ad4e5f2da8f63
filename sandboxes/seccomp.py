"""The local backend's seccomp filter: a classic-BPF program handed to bwrap (`--seccomp FD`).

Written out here instruction by instruction rather than built with libseccomp: the bindings are
not on PyPI for every interpreter we run (Debian's `python3-seccomp` is only for the system
python), and the program is small: refuse a fixed list of syscalls (EPERM), refuse the namespace
flags of clone/unshare that would let a command build itself a user namespace (and with it mount
cgroupfs, procfs or anything else), answer clone3 with ENOSYS (its flags sit in a struct BPF cannot
read; glibc then falls back to clone), allow the rest. Another architecture than the one the
program was built for is killed, and so is the x32 ABI on x86_64 (its syscall numbers would dodge
every check).

The list is at least docker's default profile (moby profiles/seccomp/default.json) for a process
without CAP_SYS_ADMIN/SYS_PTRACE/SYS_NICE/SYS_MODULE..., plus io_uring_* and memfd_secret (docker
20.10 allows both). One difference, gated by a capability no command holds: unshare(CLONE_NEWPID)
stays allowed, because the tool server's own helper (`unshare --pid`) gives each command a PID
namespace of its own with it; commands run with every capability dropped and cannot make a user
namespace to get CAP_SYS_ADMIN back, so the kernel refuses them the call.
"""

from __future__ import annotations

import errno
import os
import platform
import struct

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

# Syscalls refused outright (EPERM), by name; numbers per architecture below. Why each group:
# kernel and host state (modules, kexec, reboot, clocks, swap, quotas, accounting, syslog, hostname),
# filesystems and namespaces (the new mount API, pivot_root, chroot, umount, setns), attack
# surface docker also refuses (bpf, perf_event_open, userfaultfd, keyrings, kcmp, file handles,
# NUMA page moves, io_uring, memfd_secret, fanotify).
DENIED = (
    "acct add_key bpf chroot mount clock_adjtime clock_settime create_module delete_module fanotify_init "
    "finit_module fsconfig fsmount fsopen fspick get_kernel_syms init_module io_uring_enter "
    "io_uring_register io_uring_setup ioperm iopl kcmp kexec_file_load kexec_load keyctl lookup_dcookie "
    "mbind memfd_secret migrate_pages mount_setattr move_mount move_pages name_to_handle_at nfsservctl "
    "open_by_handle_at open_tree perf_event_open pivot_root query_module quotactl quotactl_fd reboot "
    "request_key set_mempolicy set_mempolicy_home_node setdomainname sethostname setns settimeofday "
    "swapoff swapon _sysctl syslog umount2 uselib userfaultfd ustat vhangup"
).split()

# fmt: off  (asm/unistd_64.h and asm-generic/unistd.h)
NUMBERS = {
    "x86_64": dict(
        acct=163, add_key=248, mount=165, bpf=321, chroot=161, clock_adjtime=305, clock_settime=227, create_module=174,
        delete_module=176, fanotify_init=300, finit_module=313, fsconfig=431, fsmount=432, fsopen=430,
        fspick=433, get_kernel_syms=177, init_module=175, io_uring_enter=426, io_uring_register=427,
        io_uring_setup=425, ioperm=173, iopl=172, kcmp=312, kexec_file_load=320, kexec_load=246, keyctl=250,
        lookup_dcookie=212, mbind=237, memfd_secret=447, migrate_pages=256, mount_setattr=442, move_mount=429,
        move_pages=279, name_to_handle_at=303, nfsservctl=180, open_by_handle_at=304, open_tree=428,
        perf_event_open=298, pivot_root=155, query_module=178, quotactl=179, quotactl_fd=443, reboot=169,
        request_key=249, set_mempolicy=238, set_mempolicy_home_node=450, setdomainname=171, sethostname=170,
        setns=308, settimeofday=164, swapoff=168, swapon=167, _sysctl=156, syslog=103, umount2=166,
        uselib=134, userfaultfd=323, ustat=136, vhangup=153,
        unshare=272, clone=56, clone3=435, personality=135,
    ),
    "aarch64": dict(
        acct=89, add_key=217, mount=40, bpf=280, chroot=51, clock_adjtime=266, clock_settime=112, delete_module=106,
        fanotify_init=262, finit_module=273, fsconfig=431, fsmount=432, fsopen=430, fspick=433,
        init_module=105, io_uring_enter=426, io_uring_register=427, io_uring_setup=425, kcmp=272,
        kexec_file_load=294, kexec_load=104, keyctl=219, lookup_dcookie=18, mbind=235, memfd_secret=447,
        migrate_pages=238, mount_setattr=442, move_mount=429, move_pages=239, name_to_handle_at=264,
        nfsservctl=42, open_by_handle_at=265, open_tree=428, perf_event_open=241, pivot_root=41,
        quotactl=60, quotactl_fd=443, reboot=142, request_key=218, set_mempolicy=237,
        set_mempolicy_home_node=450, setdomainname=162, sethostname=161, setns=268, settimeofday=170,
        swapoff=225, swapon=224, syslog=116, umount2=39, vhangup=58,
        unshare=97, clone=220, clone3=435, personality=92,
    ),
}
# fmt: on

CLONE_NEWTIME, CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x80, 0x20000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x10000000, 0x20000000, 0x40000000
# Namespaces no process in the sandbox may make (the server's helper needs only NEWPID).
UNSHARE_DENIED = (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET
                  | CLONE_NEWTIME)
CLONE_DENIED = UNSHARE_DENIED & ~CLONE_NEWTIME  # for clone(2) 0x80 is part of the exit signal
# personality(2) values docker's profile allows (PER_LINUX, UNAME26, ADDR_NO_RANDOMIZE..., query).
PERSONALITY_OK = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)

LD_W_ABS, JEQ, JSET, JGE, RET = 0x20, 0x15, 0x45, 0x35, 0x06
RET_ALLOW, RET_KILL_PROCESS, RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
OFF_NR, OFF_ARCH, OFF_ARG0 = 0, 4, 16  # struct seccomp_data; args are u64, little-endian low word first


class SeccompUnsupported(RuntimeError):
    """No syscall table here for this machine's architecture."""


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def program(arch: str | None = None) -> bytes:
    """The filter as the raw `struct sock_filter` array bwrap --seccomp reads."""
    arch = arch or platform.machine()
    if arch not in NUMBERS:
        raise SeccompUnsupported(f"no seccomp syscall table for {arch}; known: {sorted(NUMBERS)}")
    nr = NUMBERS[arch]
    eperm = _ins(RET, RET_ERRNO | errno.EPERM)
    out = [_ins(LD_W_ABS, OFF_ARCH), _ins(JEQ, AUDIT_ARCH[arch], jt=1), _ins(RET, RET_KILL_PROCESS),
           _ins(LD_W_ABS, OFF_NR)]
    if arch == "x86_64":  # x32 syscalls carry bit 30; refuse them all
        out += [_ins(JGE, 0x40000000, jf=1), eperm]
    for name in DENIED:
        if name in nr:
            out += [_ins(JEQ, nr[name], jf=1), eperm]
    out += [_ins(JEQ, nr["clone3"], jf=1), _ins(RET, RET_ERRNO | errno.ENOSYS)]
    for name, mask in (("unshare", UNSHARE_DENIED), ("clone", CLONE_DENIED)):
        # ld nr; nr == X ? (ld arg0; arg0 & mask ? EPERM : next) : next
        out += [_ins(LD_W_ABS, OFF_NR), _ins(JEQ, nr[name], jf=3), _ins(LD_W_ABS, OFF_ARG0),
                _ins(JSET, mask, jf=1), eperm]
    n = len(PERSONALITY_OK)
    out += [_ins(LD_W_ABS, OFF_NR), _ins(JEQ, nr["personality"], jf=n + 2), _ins(LD_W_ABS, OFF_ARG0)]
    for i, v in enumerate(PERSONALITY_OK):
        out.append(_ins(JEQ, v, jt=n - i))  # to the ALLOW at the end
    out += [eperm, _ins(RET, RET_ALLOW)]
    return b"".join(out)


def program_fd(arch: str | None = None) -> int:
    """A pipe's read end holding the program (bwrap reads it to EOF); the caller closes it."""
    data = program(arch)
    r, w = os.pipe()
    try:
        os.write(w, data)  # a few hundred bytes: far below a pipe's buffer
    finally:
        os.close(w)
    return r


__all__ = ["DENIED", "SeccompUnsupported", "program", "program_fd"]
