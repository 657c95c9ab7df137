"""What a sandboxed warm server needs as pid 1 of its namespace. Standard library only: it runs in the sandbox.

Mounted next to the servers (`pytest_server.py`, `calltests/server.py`) at /run/gymsmith and imported by them
before any code under test exists in the process.
"""

import os
import re
import signal
import time


def set_dumpable(flag):
    """Non-dumpable: processes of the same uid cannot ptrace us or read our memory through /proc."""
    import ctypes
    try:
        ctypes.CDLL(None).prctl(4, int(flag), 0, 0, 0)  # PR_SET_DUMPABLE
    except OSError:
        pass


def kill_others(spare=None):
    """Kill every other process in this pid namespace (but `spare`, a process of the server's own that never runs
    agent code). Only as its init (pid 1): never on a host.

    kill(-1) reaches every process but init in one call, and a process forking meanwhile is stopped by the
    pending signal before its child exists; it is repeated until /proc shows nobody else, so no process can
    outlive the job it belongs to by racing a list-then-kill loop. With `spare`, everyone is first stopped that
    way (SIGSTOP cannot be caught), then every process but `spare` is killed and `spare` continued."""
    if os.getpid() == 1:
        for _ in range(10_000):
            try:
                os.kill(-1, signal.SIGKILL if spare is None else signal.SIGSTOP)
            except ProcessLookupError:
                pass
            others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, spare)]
            if spare is not None:
                for pid in others:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                try:
                    os.kill(spare, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            reap()
            if not others:
                break
            time.sleep(0.0005)
    reap()


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# -- a private world for each job's process -------------------------------------------------------------------
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWPID = 0x10000000, 0x00020000, 0x08000000, 0x40000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE, MNT_DETACH = 1, 2, 4, 8, 32, 4096, 0x4000, 1 << 18, 2
DEVICES = ("null", "zero", "full", "random", "urandom")


JOB_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")  # one path component, never "." or ".."


def private_world(tmp_mb=32, own_pids=False, job_dir=None, name="job"):
    """Give this process (before any code under test runs in it) its own user, mount, IPC and network
    namespaces with fresh, empty /tmp, /workspace, /dev and /dev/shm, no /proc, then drop every capability.

    Every place the sandbox lets a process write is then private to this job: nothing one rollout's code
    leaves (files, shared memory, message queues, semaphores, sockets) can be seen by the next rollout
    verified by the same server, and nothing it deletes is missing there. The mounts cannot be undone: without capabilities
    they cannot be unmounted here, and in any namespace the code makes itself they are locked to it.
    With `own_pids`, the caller continues as pid 1 of a new pid namespace in a session of its own (an
    intermediate process waits for it and exits with it): it can then signal no process outside, not even the
    one that forked it.
    With `job_dir` (a folder under the sandbox's /jobs), its files are copied into the fresh /workspace (as
    /workspace/`name`, "job" when the name is not one path component) and /jobs is hidden: returns the copy's path
    (else None). The job's files then live on a file system of their own, whose
    inode numbers count only them: on the shared /jobs, a job's folder's inode number counted every file written
    there before it, and a thirty-fourth attacker's correct rollout wrote as many empty modules as the index of the
    repair, which a later rollout that kept the bug read (`os.stat`) and applied (accepted).
    Raises OSError when the kernel refuses (the server then fails to start a job rather than run it shared).
    """
    import ctypes
    import struct

    libc = ctypes.CDLL(None, use_errno=True)

    def check(result, what):
        if result != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    uid, gid = os.getuid(), os.getgid()
    check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET | (CLONE_NEWPID if own_pids else 0)),
          "unshare")
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                       ("/proc/self/gid_map", f"{gid} {gid} 1")):
        with open(path, "w") as f:
            f.write(text)
    check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make mounts private")
    size = f"size={tmp_mb}m,mode=1777".encode()
    check(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, size), "mount /tmp")
    if os.path.isdir("/workspace") or job_dir is not None:
        check(libc.mount(b"tmpfs", b"/workspace", b"tmpfs", MS_NOSUID | MS_NODEV, size), "mount /workspace")
    copy = None
    if job_dir is not None:
        import shutil

        # the copy's directory is named as the caller says (a repository's as its checkout is named): code that reads
        # it through a package named after it (a root `__init__.py`) finds what it finds in a real checkout
        copy = f"/workspace/{name if isinstance(name, str) and JOB_NAME.fullmatch(name) else 'job'}"
        shutil.copytree(job_dir, copy, symlinks=True)
        jobs = os.path.dirname(os.path.abspath(job_dir))
        check(libc.mount(b"tmpfs", jobs.encode(), b"tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, b"size=4k,mode=555"),
              "hide /jobs")
    # a fresh /dev holding only the harmless devices, bound from the old one
    os.mkdir("/tmp/.dev")
    check(libc.mount(b"/dev", b"/tmp/.dev", None, MS_BIND | MS_REC, None), "bind /dev")
    check(libc.mount(b"tmpfs", b"/dev", b"tmpfs", MS_NOSUID, b"size=1m,mode=755"), "mount /dev")
    for name in DEVICES:
        if os.path.exists(f"/tmp/.dev/{name}"):
            open(f"/dev/{name}", "w").close()
            check(libc.mount(f"/tmp/.dev/{name}".encode(), f"/dev/{name}".encode(), None, MS_BIND, None), f"bind /dev/{name}")
            # read-only, devices allowed: they are the host's nodes, and a job that changed their times or mode
            # would leave a note, or break, for every later one (sandbox/devices.py)
            check(libc.mount(None, f"/dev/{name}".encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, None),
                  f"make /dev/{name} read-only")
    os.mkdir("/dev/shm")
    check(libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, size), "mount /dev/shm")
    check(libc.umount2(b"/tmp/.dev", MNT_DETACH), "unmount the old /dev")
    os.rmdir("/tmp/.dev")
    # no /proc: the one this namespace inherited shows the server's pid namespace, whose processes outlive the job,
    # and a process of the host's uid may write their oom_score_adj, coredump_filter and autogroup, which the next job
    # reads (a red-team payload passed which fix to apply that way, accepted), and sees the pid counter every fork
    # moves. A fresh /proc of the job's own namespace is refused under the covers bwrap puts on /proc/sys, so an
    # empty, read-only tmpfs hides it (and a namespace the code makes itself inherits that, locked)
    check(libc.mount(b"tmpfs", b"/proc", b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, b"size=4k,mode=555"),
          "hide /proc")
    # no capability left in this namespace: the mounts above stay as they are
    check(libc.capset(struct.pack("II", 0x20080522, 0), bytes(24)), "drop capabilities")
    forbid_user_namespaces(libc)
    if own_pids:
        pid = os.fork()
        if pid:
            os.closerange(0, 1 << 16)  # holds nothing of the job's: the other end of a pipe sees the child's end
            status = os.waitpid(pid, 0)[1]
            os._exit(min(255, max(0, os.waitstatus_to_exitcode(status))))
        os.setsid()
    return copy


# unshare and clone call numbers: the sandbox's own filter kills a process of any other architecture
_CALLS = {"x86_64": (272, 56), "aarch64": (97, 220)}


def forbid_user_namespaces(libc):
    """From now on, this process and its children cannot make a user namespace (`unshare` or `clone` with
    CLONE_NEWUSER fail with EPERM). Without capabilities that is the only way to a namespace of one's own, and a
    network namespace with a loopback it may bring up hands out ephemeral ports from a table the whole host shares:
    a thirty-sixth attacker wrote to it from one sandbox and read it from a job (within its ~10 s window). A second
    seccomp filter, stacked on the sandbox's (which allows this to the server, whose pid1 needs it for each job).
    Raises OSError when the kernel refuses."""
    import ctypes
    import platform
    import struct

    unshare, clone = _CALLS[platform.machine()]
    ld, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    program = [(ld, 0, 0, 0),                       # 0: the call's number
               (jeq, 1, 0, unshare),                # 1: unshare -> 3
               (jeq, 0, 3, clone),                  # 2: clone -> 3, else -> 6
               (ld, 0, 0, 16),                      # 3: its flags (args[0], low half)
               (jset, 0, 1, CLONE_NEWUSER),         # 4: a new user namespace -> 5, else -> 6
               (ret, 0, 0, 0x00050000 | 1),         # 5: EPERM
               (ret, 0, 0, 0x7FFF0000)]             # 6: allow
    code = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *i) for i in program))
    fprog = struct.pack("HxxxxxxQ", len(program), ctypes.addressof(code))
    buffer = ctypes.create_string_buffer(fprog)
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, buffer, 0, 0) != 0:  # NO_NEW_PRIVS, SET_SECCOMP FILTER
        err = ctypes.get_errno()
        raise OSError(err, f"forbid user namespaces: {os.strerror(err)}")


def world_works():
    """Can a job's process get its private world here? Asked once when a server starts: if not, the server is
    not ready (an infrastructure failure), rather than failing every job as if the code under test had crashed."""
    pid = os.fork()
    if pid == 0:
        try:
            private_world()
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
