"""A seccomp filter for every sandbox: kernel state that namespaces do not separate is refused.

Namespaces give a sandbox its own processes, mounts, IPC, network and users, but some kernel state is shared by
every sandbox of the host, and sandboxes running at the same time, or one after another, can pass data through
it. Red-team payloads did, each time to hand a correct rollout's answers to a rollout of the same task that kept
its bug, which was then accepted:

- **kernel keys** (`add_key`, `request_key`, `keyctl`) are kept per host uid: a key linked into the uid's session
  keyring by one sandbox is read by any later one;
- **file locks** belong to the file, not to a namespace, and work on read-only files: every sandbox mounts the
  same standard library, and one sandbox's byte-range locks at chosen offsets (far past the end of the file) were
  read by another with `F_GETLK`, a byte per lock. `flock`, leases, `F_NOTIFY` and `inotify` on shared files are
  the same kind of channel;
- **the page cache** of a shared file: evicting pages (`posix_fadvise(DONTNEED)`, `madvise(MADV_PAGEOUT)`) and
  asking which are resident (`mincore`, `cachestat`, a read with `RWF_NOWAIT`, io_uring) is another;
- **the kernel's shared-memory inode numbers**: every memfd, shared anonymous mapping and SysV segment takes the
  next number of one counter for the whole host, so a process that makes them moves it and one that reads a
  memfd's inode number (`fstat`) reads it: a thirty-first attacker's correct rollout left which repair fixes the bug
  there and a later rollout that kept it read it while the verifier ran its code (accepted). Mappings cannot be
  refused, so `memfd_create` (and `memfd_secret`) are: a verified job, which has no /proc, then has no way to read
  the counter. The agent's own sandbox still can, through the inode numbers `/proc/self/maps` shows
  (docs/verifier.md names it);
- **other host-wide counters a sandbox can move and read**: perf event ids (`perf_event_open`, then
  `PERF_EVENT_IOC_ID`: a thirty-third attacker passed which repair to apply in it, accepted), socket and
  network-namespace cookies (`getsockopt` `SO_COOKIE`, `SO_NETNS_COOKIE`; `sock_diag` reports cookies too: the same
  attacker, accepted), unique mount ids (`statmount`, `listmount`, `statx` with `STATX_MNT_ID_UNIQUE`,
  `name_to_handle_at` with `AT_HANDLE_MNT_ID_UNIQUE`), namespace ids (the ioctls of namespace files and pidfds: a
  thirty-fifth attacker passed the repair in them, accepted), pidfds (their inode numbers count every process the
  host made), and `bpf`;
- **owner-only state of a shared inode**: the sandbox's uid is the host uid that runs gymsmith (root in CI), so a
  sandboxed process owns every host file it shares, and calls that check only ownership, not the read-only mount,
  write to the inode: a write-lifetime hint (`F_SET_RW_HINT`) set in one sandbox was read in the next, and by a
  verification's package process. The root cause, a sandbox uid that owns host files, is not removed here (running
  bubblewrap as an unprivileged host uid would): docs/verifier.md names it.

Nothing a sandboxed program needs uses them (a test that locks files fails on the reference too, and is not
used), so they fail with EPERM in every sandbox and in everything it starts (a filter is inherited across fork
and exec and cannot be removed). What no filter stops is timing: a process that reads a shared file and measures
how long it takes learns whether another had read it. That is a slow, noisy channel between sandboxes running at
the same time; docs/verifier.md names it.

The program is classic BPF, assembled here (no libseccomp): check the architecture, then the call number, then
for `fcntl`, `fadvise64`, `madvise`, `preadv2`/`pwritev2`, `getsockopt`, `socket`, `statx`, `clone`,
`name_to_handle_at` and `ioctl` the arguments. A process of another architecture (a 32-bit program on a 64-bit host,
x32 calls) is killed, since its call numbers differ.
"""

from __future__ import annotations

import platform
import struct

BLOCKED = ("add_key", "request_key", "keyctl", "flock", "inotify_init", "inotify_init1", "inotify_add_watch",
           "fanotify_init", "mincore", "cachestat", "io_uring_setup", "io_uring_enter", "io_uring_register",
           "process_madvise", "memfd_create", "memfd_secret", "bpf", "perf_event_open",
           "statmount", "listmount", "pidfd_open")
FCNTL_BLOCKED = {"F_GETLK": 5, "F_SETLK": 6, "F_SETLKW": 7, "F_OFD_GETLK": 36, "F_OFD_SETLK": 37, "F_OFD_SETLKW": 38,
                 "F_SETLEASE": 1024, "F_GETLEASE": 1025, "F_NOTIFY": 1026,
                 # write-lifetime hints live on the inode, and only ownership is checked: a sandbox owns the files
                 # it shares (note below), so a hint set in one was read in the next
                 "F_GET_RW_HINT": 1035, "F_SET_RW_HINT": 1036, "F_GET_FILE_RW_HINT": 1037, "F_SET_FILE_RW_HINT": 1038}
FADVISE_BLOCKED = {"POSIX_FADV_DONTNEED": 4}
MADVISE_BLOCKED = {"MADV_COLD": 20, "MADV_PAGEOUT": 21}  # page out a shared file's pages
# socket and network-namespace cookies come from host-wide counters that only asking for a cookie moves: one
# sandbox could advance them and a later one read them (as the memfd inode counter); sock_diag reports cookies too
SOL_SOCKET, GETSOCKOPT_BLOCKED = 1, {"SO_COOKIE": 57, "SO_NETNS_COOKIE": 71}
AF_NETLINK, NETLINK_SOCK_DIAG = 16, 4
STATX_MNT_ID_UNIQUE = 0x4000  # a mount's 64-bit id, from a host-wide counter every mount moves (as statmount's)
AT_HANDLE_MNT_ID_UNIQUE = 0x1  # name_to_handle_at's flag for the same id
# ioctls of namespace files (NSIO, 0xb7: NS_GET_ID, NS_GET_MNTNS_ID, ...) and of pidfds (0xFF: PIDFD_GET_*_NAMESPACE)
# hand out namespace ids, drawn from a host-wide counter every new namespace moves; a pidfd's inode number is the
# next of another (one per process ever made), so pidfds are refused too (`pidfd_open`, `clone` with CLONE_PIDFD;
# `clone3`, whose flags a filter cannot read, answers ENOSYS and the C library falls back to `clone`)
IOCTL_TYPES_BLOCKED = {"NSIO": 0xB7, "PIDFS": 0xFF}
CLONE_PIDFD = 0x1000
# a new user namespace gives its maker every capability over namespaces it then makes: a network namespace with a
# loopback it may bring up, whose ephemeral ports come from a perturbation table the whole host shares (a
# thirty-sixth attacker wrote it from one sandbox and read it from another within its ~10 s window). Only the
# verifier's warm servers need them (pid1 gives each job its own world, then forbids more: pid1.py)
CLONE_NEWUSER = 0x10000000
_ENOSYS = 38
RWF_NOWAIT = 0x8  # preadv2/pwritev2: fails if the pages are not cached, which tells residency without timing
# AUDIT_ARCH value and call numbers, per machine (a call the machine lacks is left out)
_ARCH = {
    "x86_64": (0xC000003E, {"add_key": 248, "request_key": 249, "keyctl": 250, "flock": 73, "inotify_init": 253,
                            "inotify_init1": 294, "inotify_add_watch": 254, "fanotify_init": 300, "mincore": 27,
                            "cachestat": 451, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
                            "process_madvise": 440, "memfd_create": 319, "memfd_secret": 447, "fcntl": 72, "fadvise64": 221, "madvise": 28, "preadv2": 327,
                            "pwritev2": 328, "bpf": 321, "perf_event_open": 298, "getsockopt": 55, "socket": 41, "statx": 332,
                            "statmount": 457, "listmount": 458, "pidfd_open": 434, "clone3": 435, "clone": 56,
                            "ioctl": 16, "name_to_handle_at": 303, "unshare": 272}),
    "aarch64": (0xC00000B7, {"add_key": 217, "request_key": 218, "keyctl": 219, "flock": 32, "inotify_init1": 26,
                             "inotify_add_watch": 27, "fanotify_init": 262, "mincore": 232, "cachestat": 451,
                             "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
                             "process_madvise": 440, "memfd_create": 279, "memfd_secret": 447, "fcntl": 25, "fadvise64": 223, "madvise": 233, "preadv2": 286,
                             "pwritev2": 287, "bpf": 280, "perf_event_open": 241, "getsockopt": 209, "socket": 198, "statx": 291,
                             "statmount": 457, "listmount": 458, "pidfd_open": 434, "clone3": 435, "clone": 220,
                             "ioctl": 29, "name_to_handle_at": 264, "unshare": 97}),
}
_X32_BIT = 0x40000000  # x86_64: call numbers with this bit are the x32 ABI's

# classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_ALU_AND_K = 0x54
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_EPERM = 1
_NR, _ARCH_OFFSET = 0, 4  # offsets in struct seccomp_data
_ARG = 16  # args[0]; each argument is 8 bytes, its low half first (little-endian machines only, as both above are)


def supported() -> bool:
    """Whether this machine has a filter (x86_64 and aarch64 do)."""
    return platform.machine() in _ARCH


def filter_program(machine: str | None = None, *, user_namespaces: bool = False) -> bytes:
    """The filter as bubblewrap's `--seccomp FD` reads it: an array of `struct sock_filter`. `user_namespaces`:
    whether `unshare` and `clone` may make a user namespace (only a warm server's pid1 needs to). Raises ValueError
    for a machine it has no call numbers for (`supported()`)."""
    machine = machine or platform.machine()
    if machine not in _ARCH:
        raise ValueError(f"no seccomp filter for machine {machine!r} (known: {', '.join(sorted(_ARCH))})")
    arch, numbers = _ARCH[machine]
    # (label or None, opcode, k, jump-if-true label, jump-if-false label); None as a jump means the next instruction
    code: list[tuple[str | None, int, int, str | None, str | None]] = [
        (None, _LD_W_ABS, _ARCH_OFFSET, None, None),
        (None, _JEQ_K, arch, None, "kill"),
        (None, _LD_W_ABS, _NR, None, None),
    ]
    if machine == "x86_64":
        code.append((None, _JGE_K, _X32_BIT, "kill", None))
    code += [(None, _JEQ_K, numbers[name], "deny", None) for name in BLOCKED if name in numbers]
    code += [(None, _JEQ_K, numbers["fcntl"], "fcntl", None), (None, _JEQ_K, numbers["fadvise64"], "fadvise", None),
             (None, _JEQ_K, numbers["madvise"], "madvise", None), (None, _JEQ_K, numbers["preadv2"], "rwflags", None),
             (None, _JEQ_K, numbers["pwritev2"], "rwflags", None),
             (None, _JEQ_K, numbers["getsockopt"], "getsockopt", None), (None, _JEQ_K, numbers["socket"], "socket", None),
             (None, _JEQ_K, numbers["statx"], "statx", None),
             (None, _JEQ_K, numbers["clone3"], "nosys", None), (None, _JEQ_K, numbers["clone"], "clone", None),
             (None, _JEQ_K, numbers["unshare"], "unshare", None),
             (None, _JEQ_K, numbers["ioctl"], "ioctl", None),
             (None, _JEQ_K, numbers["name_to_handle_at"], "handle", None),
             (None, _RET_K, _RET_ALLOW, None, None),
             ("fcntl", _LD_W_ABS, _ARG + 8 * 1, None, None)]  # fcntl(fd, cmd, ...): cmd
    code += [(None, _JEQ_K, cmd, "deny", None) for cmd in FCNTL_BLOCKED.values()]
    code += [(None, _RET_K, _RET_ALLOW, None, None),
             ("fadvise", _LD_W_ABS, _ARG + 8 * 3, None, None)]  # fadvise64(fd, offset, len, advice): advice
    code += [(None, _JEQ_K, advice, "deny", None) for advice in FADVISE_BLOCKED.values()]
    code += [(None, _RET_K, _RET_ALLOW, None, None),
             ("madvise", _LD_W_ABS, _ARG + 8 * 2, None, None)]  # madvise(addr, length, advice): advice
    code += [(None, _JEQ_K, advice, "deny", None) for advice in MADVISE_BLOCKED.values()]
    code += [(None, _RET_K, _RET_ALLOW, None, None),
             ("rwflags", _LD_W_ABS, _ARG + 8 * 5, None, None),  # preadv2(fd, iov, n, pos_l, pos_h, flags): flags
             (None, _JSET_K, RWF_NOWAIT, "deny", None),
             (None, _RET_K, _RET_ALLOW, None, None),
             ("getsockopt", _LD_W_ABS, _ARG + 8 * 1, None, None),  # getsockopt(fd, level, optname, ...)
             (None, _JEQ_K, SOL_SOCKET, None, "allow"),
             (None, _LD_W_ABS, _ARG + 8 * 2, None, None)]
    code += [(None, _JEQ_K, opt, "deny", None) for opt in GETSOCKOPT_BLOCKED.values()]
    code += [(None, _RET_K, _RET_ALLOW, None, None),
             ("socket", _LD_W_ABS, _ARG, None, None),  # socket(domain, type, protocol)
             (None, _JEQ_K, AF_NETLINK, None, "allow"),
             (None, _LD_W_ABS, _ARG + 8 * 2, None, None),
             (None, _JEQ_K, NETLINK_SOCK_DIAG, "deny", None),
             (None, _RET_K, _RET_ALLOW, None, None),
             ("statx", _LD_W_ABS, _ARG + 8 * 3, None, None),  # statx(dirfd, path, flags, mask, buf): mask
             (None, _JSET_K, STATX_MNT_ID_UNIQUE, "deny", None),
             (None, _RET_K, _RET_ALLOW, None, None),
             ("clone", _LD_W_ABS, _ARG, None, None),  # clone(flags, ...) on both machines
             (None, _JSET_K, CLONE_PIDFD | (0 if user_namespaces else CLONE_NEWUSER), "deny", None),
             (None, _RET_K, _RET_ALLOW, None, None),
             ("unshare", _LD_W_ABS, _ARG, None, None),  # unshare(flags)
             (None, _JSET_K, 0 if user_namespaces else CLONE_NEWUSER, "deny", None),
             (None, _RET_K, _RET_ALLOW, None, None),
             ("handle", _LD_W_ABS, _ARG + 8 * 4, None, None),  # name_to_handle_at(dfd, name, handle, mnt_id, flags)
             (None, _JSET_K, AT_HANDLE_MNT_ID_UNIQUE, "deny", None),
             (None, _RET_K, _RET_ALLOW, None, None),
             ("ioctl", _LD_W_ABS, _ARG + 8 * 1, None, None),  # ioctl(fd, request): the request's type byte
             (None, _ALU_AND_K, 0xFF00, None, None)]
    code += [(None, _JEQ_K, kind << 8, "deny", None) for kind in IOCTL_TYPES_BLOCKED.values()]
    code += [("allow", _RET_K, _RET_ALLOW, None, None),
             ("nosys", _RET_K, _RET_ERRNO | _ENOSYS, None, None),
             ("deny", _RET_K, _RET_ERRNO | _EPERM, None, None),
             ("kill", _RET_K, _RET_KILL_PROCESS, None, None)]
    where = {label: i for i, (label, *_) in enumerate(code) if label}

    def offset(i: int, target: str | None) -> int:
        jump = 0 if target is None else where[target] - i - 1
        if not 0 <= jump <= 255:
            raise ValueError(f"seccomp program: jump from {i} to {target} out of range")
        return jump

    return b"".join(struct.pack("=HBBI", op, offset(i, jt), offset(i, jf), k)
                    for i, (_, op, k, jt, jf) in enumerate(code))
