"""Containment: attacks from inside a bubblewrap sandbox, each of which must fail while the harness keeps working.

Every test is one attack, run for real against the real sandbox; `conftest.py` prints the summary line
("sandbox containment: N attacks tried, N contained").
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from gymsmith.sandbox import CowWorkspace, KillReason, Limits, open_sandbox
from gymsmith.verifier import VerifierService
from gymsmith.verifier.pytest_runner import WarmPytest

LIMITS = Limits(memory_mb=256, pids=64, cpu_s=20, file_size_mb=64, disk_mb=32, tmp_mb=16, timeout_s=20)
TEMPLATES = Path(__file__).resolve().parents[1] / "src/gymsmith/families/code/templates"


@pytest.fixture()
def sb(tmp_path):
    with CowWorkspace(disk_mb=LIMITS.disk_mb) as ws:
        pristine = tmp_path / "pristine"
        pristine.mkdir()
        (pristine / "main.py").write_text("print('hi')\n")
        ws.restore(pristine)
        with open_sandbox(ws.path, limits=LIMITS) as sandbox:
            yield sandbox
            # the harness keeps working after every attack
            after = sandbox.exec(["python3", "main.py"])
            assert after.ok and after.stdout == "hi\n", after


def py(code: str) -> list[str]:
    return ["python3", "-c", code]


def test_attack_read_hidden_tests_and_checks(sb):
    targets = [TEMPLATES / "test_lru.py", TEMPLATES.parent / "checks.py", Path.home() / ".cache/gymsmith"]
    r = sb.exec(" ; ".join(f"cat {t} 2>&1 | head -c 200" for t in targets) + "; python3 -c 'import gymsmith'")
    assert "def test_" not in r.stdout and "def verify" not in r.stdout
    assert "No module named 'gymsmith'" in r.stderr


def test_attack_read_host_files(sb):
    r = sb.exec("cat /etc/shadow /etc/passwd /root/.bash_history /work 2>&1; ls / ")
    assert "root:" not in r.stdout and "No such file" in r.stdout
    assert set(r.stdout.split()) >= {"usr", "workspace", "tmp", "proc"} and "work" not in r.stdout.split()


def test_attack_read_another_tasks_workspace(sb, tmp_path):
    other = tmp_path / "other-task"
    other.mkdir()
    (other / "secret.py").write_text("ANSWER = 42\n")
    r = sb.exec(f"cat {other}/secret.py; ls {tmp_path}")
    assert "ANSWER" not in r.stdout and r.exit_code != 0


def test_attack_write_outside_workspace(sb):
    targets = ["/usr/pwned", "/etc/pwned", f"{sys.base_prefix}/pwned", "/pwned", "/proc/sysrq-trigger"]
    r = sb.exec(" ; ".join(f"(echo x > {t}) 2>&1" for t in targets))
    assert r.stdout.count("cannot create") == len(targets), r.stdout  # every write refused
    assert not any(os.path.exists(t) for t in targets[:4])


def test_attack_connect_to_host_loopback(sb):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    try:
        r = sb.exec(py(f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('CONNECTED')"))
        assert "CONNECTED" not in r.stdout and "Connection refused" in r.stderr
    finally:
        server.close()


def test_attack_resolve_dns(sb):
    r = sb.exec(py("import socket; print(socket.getaddrinfo('pypi.org', 443))"))
    assert r.exit_code != 0 and "gaierror" in r.stderr


def test_attack_fork_bomb(sb):
    sb.exec(["/bin/true"])
    idle = set(sb.cgroup.pids()) if sb.cgroup is not None else set()  # the sandbox's own init and bwrap
    r = sb.exec(py("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"), timeout=3)
    # Contained either way: the process limit stops the forks and the timeout ends the rest, or (on a host whose
    # copies of the interpreter cost more) the memory limit ends them first; the command server may be the one
    # the OOM killer picks, and the next command starts a new one (the fixture's check after every attack).
    assert r.killed in (KillReason.TIMEOUT, KillReason.MEMORY), r
    assert sb.cgroup is not None and set(sb.cgroup.pids()) <= idle  # nothing of it is left


def test_attack_memory_bomb(sb):
    r = sb.exec(py("blocks = []\nwhile True:\n    blocks.append(bytearray(32 << 20))"))
    assert r.killed is KillReason.MEMORY and r.exit_code != 0


def test_attack_fill_the_disk(sb):
    r = sb.exec("dd if=/dev/zero of=big bs=1M count=200 2>&1; dd if=/dev/zero of=/tmp/big bs=1M count=200 2>&1; "
                "ls -l big /tmp/big")
    assert "No space left on device" in r.stdout
    assert sb.exec("stat -c %s big").stdout.strip() and int(sb.exec("stat -c %s big").stdout) <= LIMITS.disk_mb << 20


def test_attack_busy_loop_past_timeout(sb):
    started = time.monotonic()
    r = sb.exec(py("while True: pass"), timeout=1)
    assert r.killed is KillReason.TIMEOUT and time.monotonic() - started < 5


def test_attack_sleep_past_timeout(sb):
    r = sb.exec(["sleep", "60"], timeout=0.5)
    assert r.killed is KillReason.TIMEOUT


def test_attack_leave_a_background_process(sb):
    marker = f"{os.getpid()}{int(time.time()) % 1000}"
    sb.exec(f"(setsid sleep {marker} &) ; nohup sleep {marker} >/dev/null 2>&1 & disown; echo started")
    time.sleep(0.2)
    survivors = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True).stdout.split()
    assert survivors == []


def test_attack_see_the_verifier_in_proc(sb):
    """The agent's sandbox has no /proc (an empty, read-only directory): no process of the host, nor its own
    `/proc/self/maps`, whose inode numbers of shared mappings read a counter the whole host shares (a thirty-second
    attacker's later rollout read a correct one's repair there, accepted 1.0)."""
    with WarmPytest() as warm:
        warm.run({"t/test_x.py": "def test_x():\n    pass\n"}, ["t"])  # a live verifier runner on this host
        r = sb.exec("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done")
        assert "gymsmith" not in r.stdout and "pytest_server" not in r.stdout
        assert sb.exec("ls -A /proc | wc -l; touch /proc/x 2>&1 | grep -c 'Read-only'").stdout.split() == ["0", "1"]
        maps = sb.exec(py("import mmap\nm = mmap.mmap(-1, 4096, flags=mmap.MAP_SHARED)\n"
                          "print(open('/proc/self/maps').read())"))
        assert maps.exit_code != 0 and "No such file" in maps.stderr, maps


def test_attack_ptrace(sb):
    """Attach to the harness, its parent and a verifier process by their host pids: none exists in here."""
    with VerifierService() as verifier:
        _score_one_ops_task(verifier)  # the pool starts workers lazily: make one live
        targets = [os.getpid(), os.getppid(), *verifier.pids()]
        code = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                f"for pid in {targets}:\n"
                "    rc = libc.ptrace(16, pid, 0, 0)\n"  # PTRACE_ATTACH
                "    print(pid, rc, ctypes.get_errno())\n")
        r = sb.exec(py(code))
    results = [line.split() for line in r.stdout.splitlines()]
    assert len(results) == len(targets) and all(rc == "-1" and errno == "3" for _, rc, errno in results), r.stdout


def _score_one_ops_task(verifier: VerifierService) -> None:
    from gymsmith.registry import get_family

    ops = get_family("ops")
    task, env = ops.generate(1, difficulty=0.1), ops.make_env()
    env.reset(task, seed=0)
    verifier.verify(task, env.final_state(Path(tempfile.mkdtemp())))
    env.close()
    assert verifier.pids()


def test_attack_symlink_read_through_the_harness(sb):
    sb.exec("ln -s /etc/shadow shadow && ln -s /root home && ln -s /proc/1/root rootfs")
    for path in ("shadow", "home/.bashrc", "rootfs/etc/hostname"):
        with pytest.raises(PermissionError):
            sb.read_file(path)


def test_attack_kill_everything(sb):
    sentinel = subprocess.Popen(["sleep", "30"])
    try:
        r = sb.exec("kill -9 -1; echo still-here")
        assert sentinel.poll() is None  # a process of the host survived
        assert r.exit_code in (0, 137)
    finally:
        sentinel.kill()
        sentinel.wait()


def test_attack_signal_the_sandbox_init(sb):
    """The command server is pid 1 of the namespace: signals from inside to it must not end it (or the rollout)."""
    r = sb.exec("for s in INT TERM HUP QUIT USR1 KILL STOP; do kill -$s 1; done; echo sent")
    assert r.stdout == "sent\n"
    assert sb.exec(["true"]).ok


def test_attack_ptrace_or_read_the_sandbox_init(sb):
    """Same uid as pid 1, but it is non-dumpable: no attach, no reading its memory or environment."""
    code = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "print(libc.ptrace(16, 1, 0, 0), ctypes.get_errno())\n"
            "for f in ('mem', 'environ', 'maps'):\n"
            "    try:\n        open(f'/proc/1/{f}', 'rb').read(16); print(f, 'READ')\n"
            "    except OSError as e:\n        print(f, 'denied', e.errno)\n")
    r = sb.exec(py(code))
    assert r.stdout.splitlines()[0] == "-1 1" and "READ" not in r.stdout, r.stdout  # EPERM


def test_attack_leave_something_for_the_next_rollout(sb):
    """A file in /tmp and a process: after the rollout's reset, neither remains."""
    sb.exec("echo planted > /tmp/plant; (sleep 100 &); echo ok")
    sb.reset()
    r = sb.exec("cat /tmp/plant 2>&1; ps -e -o comm= | grep -c sleep")
    assert "planted" not in r.stdout and r.stdout.split()[-1] == "0"


KEYS = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
session = ctypes.c_int(-3)  # KEY_SPEC_SESSION_KEYRING
calls = {"add_key": (248, b"user", b"gs-note", b"the answers", 11, session),
         "request_key": (249, b"user", b"gs-note", None, session),
         "keyctl": (250, 0, session, 0, 0, 0)}  # KEYCTL_GET_KEYRING_ID
for name, args in calls.items():
    rc = libc.syscall(*args)
    print(name, rc, ctypes.get_errno())
"""


def test_attack_share_answers_through_the_kernel_keyring(sb, tmp_path):
    """Kernel keys are kept per host uid, not per namespace: a key linked into the uid's session keyring by one
    sandbox is read by the next (a red-team payload passed a correct rollout's answers to a later one that kept the
    bug, through the verifier). Every key call fails with EPERM, here and in a second sandbox."""
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("the call numbers below are x86_64's")
    first = sb.exec(py(KEYS))
    with open_sandbox(tmp_path, limits=LIMITS) as other:
        second = other.exec(py(KEYS))
    for r in (first, second):
        lines = dict(line.split(" ", 1) for line in r.stdout.splitlines())
        assert set(lines) == {"add_key", "request_key", "keyctl"}, r
        assert all(v == "-1 1" for v in lines.values()), r  # -1, errno EPERM


SHARED_STATE = """
import ctypes, fcntl, os, struct
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(os.__file__, os.O_RDONLY)  # the standard library: the same inode in every sandbox
lock = struct.pack("hhqqhh", fcntl.F_RDLCK, 0, (1 << 40) + 77, 1, 0, 0)
def attempt(name, call):
    try:
        call()
        print(name, "allowed")
    except OSError as exc:
        print(name, exc.errno)
def check(rc):
    if rc < 0:
        raise OSError(ctypes.get_errno(), "")
attempt("F_SETLK", lambda: fcntl.fcntl(fd, fcntl.F_SETLK, lock))
attempt("F_GETLK", lambda: fcntl.fcntl(fd, fcntl.F_GETLK, lock))
attempt("F_OFD_SETLK", lambda: fcntl.fcntl(fd, 37, lock))
attempt("F_SETLEASE", lambda: fcntl.fcntl(fd, 1024, fcntl.F_RDLCK))
attempt("flock", lambda: fcntl.flock(fd, fcntl.LOCK_SH))
attempt("inotify_init1", lambda: check(libc.inotify_init1(0)))
attempt("fadvise_dontneed", lambda: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED))
attempt("mincore", lambda: check(libc.mincore(ctypes.c_void_p(libc.valloc(4096)), 4096, ctypes.create_string_buffer(1))))
attempt("F_SET_RW_HINT", lambda: fcntl.fcntl(fd, 1036, struct.pack("Q", 2)))
attempt("preadv2_nowait", lambda: os.preadv(fd, [bytearray(16)], 0, os.RWF_NOWAIT))
import mmap
attempt("madvise_pageout", lambda: mmap.mmap(fd, 4096, prot=mmap.PROT_READ).madvise(21))
attempt("memfd_create", lambda: os.memfd_create("x"))  # its inode number is a host-wide counter's
import socket
unix = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
attempt("SO_COOKIE", lambda: unix.getsockopt(socket.SOL_SOCKET, 57, 8))  # host-wide counters: asking moves them
attempt("SO_NETNS_COOKIE", lambda: unix.getsockopt(socket.SOL_SOCKET, 71, 8))
attempt("sock_diag", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 4))
attempt("bpf", lambda: check(libc.syscall(321, 0, 0, 0)))
attempt("perf_event_open", lambda: check(libc.syscall(298, 0, 0, -1, -1, 0)))
attempt("statmount", lambda: check(libc.syscall(457, 0, 0, 0, 0)))
attempt("listmount", lambda: check(libc.syscall(458, 0, 0, 0, 0)))
attempt("statx_mnt_id_unique", lambda: check(libc.syscall(332, -100, b"/", 0, 0x4000, ctypes.create_string_buffer(256))))
attempt("pidfd_open", lambda: os.pidfd_open(os.getpid()))  # a pidfd's inode number counts the host's processes
attempt("clone_pidfd", lambda: check(libc.syscall(56, 0x1000 | 17, 0, 0, 0, 0)))
attempt("unshare_user", lambda: check(libc.unshare(0x10000000)))  # a netns of one's own: the host's port table
attempt("unshare_user_net", lambda: check(libc.unshare(0x10000000 | 0x40000000)))
attempt("clone_user", lambda: (lambda pid: os._exit(0) if pid == 0 else check(pid))(libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)))
if os.path.exists("/proc/self/ns/uts"):  # only a warm server's sandbox has a /proc
    ns = os.open("/proc/self/ns/uts", os.O_RDONLY)
    attempt("NS_GET_NSTYPE", lambda: check(libc.ioctl(ns, 0xB703)))  # namespace ids: a host-wide counter
attempt("handle_mnt_id_unique", lambda: check(libc.name_to_handle_at(-100, b"/", ctypes.create_string_buffer(136),
                                                                     ctypes.byref(ctypes.c_int()), 1)))
attempt("F_GETFL", lambda: fcntl.fcntl(fd, fcntl.F_GETFL))
attempt("fork", lambda: os.waitpid(os.fork() or os._exit(0), 0))
attempt("posix_spawn", lambda: os.waitpid(os.posix_spawn("/bin/true", ["true"], {}), 0))
attempt("statx_basic", lambda: check(libc.syscall(332, -100, b"/", 0, 0x7ff, ctypes.create_string_buffer(256))))
attempt("SO_TYPE", lambda: unix.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE))
attempt("netlink_route", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))
"""


def test_attack_signal_through_locks_and_the_page_cache_of_shared_files(sb):
    """Every sandbox mounts the same files (the standard library): a lock on one belongs to the file, not to a
    namespace. A red-team payload in a correct rollout's verification published its answers as byte-range locks on
    `os.py` and a parallel rollout that kept its bug read them with F_GETLK and was accepted (0.9855); another
    carried bytes in write-lifetime hints, which only check that the caller owns the file (a sandbox's uid is the
    host's). Locks, leases, notifications, inotify, hints, page-cache eviction and residency queries, and memfds
    (whose inode numbers come from one counter for the whole host: a thirty-first attacker passed which repair to
    apply in it), perf events and socket cookies (a thirty-third passed it in those), namespace ids (a thirty-fifth,
    through pidfd and namespace-file ioctls), pidfds, namespace cookies, sock_diag, unique mount ids, BPF and new user
    namespaces (whose network namespace reads the host's ephemeral-port table: a thirty-sixth) all fail with EPERM; fork, posix_spawn (clone3 answers ENOSYS: glibc falls back to clone), ordinary fcntl, statx,
    getsockopt and netlink calls still work."""
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("the call numbers in the probe are x86_64's")
    from gymsmith.sandbox.bwrap import BwrapSandbox

    with BwrapSandbox(sb.workspace, LIMITS, proc=True) as server_like:  # a warm server's: /proc, namespace files
        runs = [sb.exec(py(SHARED_STATE)), server_like.exec(py(SHARED_STATE))]
    for r in runs:
        got = dict(line.split(" ", 1) for line in r.stdout.splitlines())
        allowed = ("F_GETFL", "fork", "posix_spawn", "statx_basic", "SO_TYPE", "netlink_route")
        assert [got.pop(k) for k in allowed] == ["allowed"] * len(allowed), r
        assert got and all(v == "1" for v in got.values()), r  # errno 1: EPERM
    assert "NS_GET_NSTYPE 1" in runs[1].stdout


RESIDENCY_PROBE = """
import mmap, os, resource, sys
for path in sys.argv[1:]:
    with open(path, 'rb') as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    m.madvise(mmap.MADV_RANDOM)  # no read-ahead: one fault per page touched, major exactly when it was out
    before = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
    pages = min(len(m) // mmap.PAGESIZE + 1, 4096)
    for k in range(pages):
        m[min(k * mmap.PAGESIZE, len(m) - 1)]
    print(path, pages, resource.getrusage(resource.RUSAGE_SELF).ru_majflt - before)
"""


def test_attack_carry_bits_in_the_residency_of_shared_pages(sb):
    """Whether a page of a file every sandbox maps is cached is kernel state kept per file: a twenty-seventh
    attacker wrote a correct rollout's answers as pages brought in (touched) or sent out (its own memory cgroup
    filled), read them in a later sandbox as major faults after MADV_RANDOM, and was accepted with the bug kept.
    Every file a sandbox can read from the host, the pristine tree under its overlay included, is held in memory
    while it can: here the host evicts what it can of a large shared library and of the task's file (as an
    attacker's eviction would), and touching every page from the sandbox still finds each one resident."""
    libs = Path("/usr/lib/x86_64-linux-gnu")
    if not libs.is_dir():
        pytest.skip("no /usr/lib/x86_64-linux-gnu on this machine")
    largest = max((p for p in libs.iterdir() if p.is_file() and not p.is_symlink()), key=lambda p: p.stat().st_size)
    pristine_file = sb.resolve("main.py")  # the overlay's lower file, read through the workspace
    for path in (largest, pristine_file):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # drops every page no one holds
        finally:
            os.close(fd)
    r = sb.exec(py(RESIDENCY_PROBE) + [str(largest), "/workspace/main.py"])
    faults = {line.split()[0]: (int(line.split()[1]), int(line.split()[2])) for line in r.stdout.splitlines()}
    assert set(faults) == {str(largest), "/workspace/main.py"}, r
    assert faults[str(largest)][0] > 100, faults  # a file large enough to carry many bits
    assert all(majors == 0 for _, majors in faults.values()), faults


def test_attack_leave_a_note_in_the_device_nodes(sb):
    """bwrap binds the host's own /dev/null, zero, full, random, urandom and tty, and the sandbox's uid owns them
    (it is the host's): a twenty-eighth attacker wrote a correct rollout's answers into their timestamps, which the
    next sandbox read with stat (accepted), and `chmod 0 /dev/null` would break every later sandbox. They are
    read-only now, devices still usable: writing to /dev/null works, changing its times or mode does not, and the
    host's nodes are as they were."""
    before = {n: os.stat(f"/dev/{n}") for n in ("null", "zero", "urandom")}
    r = sb.exec("echo hi > /dev/null && echo wrote; head -c 4 /dev/urandom | wc -c; "
                "touch -d @424242 /dev/null; echo touched=$?; touch /dev/zero; echo now=$?; "
                "chmod 666 /dev/urandom; echo chmod=$?")
    assert "wrote" in r.stdout and "\n4\n" in r.stdout, r
    assert "touched=1" in r.stdout and "now=1" in r.stdout and "chmod=1" in r.stdout, r
    assert "Read-only file system" in r.stderr, r
    for name, st in before.items():
        after = os.stat(f"/dev/{name}")
        assert (after.st_mtime_ns, after.st_atime_ns, after.st_mode) == (st.st_mtime_ns, st.st_atime_ns, st.st_mode)


def test_attack_leave_a_note_in_the_loopback_counters(sb):
    """The loopback's packet counters belong to the network namespace: a command can set them (send N bytes) and a
    later rollout read them, unless every rollout gets a fresh namespace."""
    def received() -> int:  # the sandbox has no /proc: the counters by netlink
        r = sb.exec("ip -s link show lo | awk '/RX:/ {getline; print $1}'")
        return int(r.stdout)

    sb.exec(py("import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
               "[s.sendto(b'x' * 1000, ('127.0.0.1', 9)) for _ in range(50)]"))
    assert received() >= 50_000
    sb.reset()
    assert received() < 1000


def test_attack_make_the_command_server_use_up_its_cpu(tmp_path):
    """The command server reads and drops every byte a command prints: a flood of tiny writes makes it burn CPU.
    When it ran under the commands' CPU limit, a command paced to that limit had the kernel kill the server, which
    the host could only report as a broken sandbox (an infrastructure error: a failing rollout excluded instead of
    scored). The limit is the command's alone; the server outlives the flood."""
    limits = Limits(memory_mb=256, pids=64, cpu_s=2, file_size_mb=64, disk_mb=32, tmp_mb=16, timeout_s=20)
    flood = ("import fcntl, os, time\nend = time.time() + 8\n"
             "for fd in (1, 1, 2):\n    if os.fork() == 0:\n        break\nelse:\n    fd = 2\n"
             "try:\n    fcntl.fcntl(fd, 1031, 1 << 20)\nexcept OSError:\n    pass\n"  # F_SETPIPE_SZ: 1 MiB
             "block = bytes(1 << 20)\nwhile time.time() < end:\n    os.write(fd, block)\n")
    with open_sandbox(tmp_path, limits=limits) as sandbox:
        r = sandbox.exec(py(flood), timeout=12)
        assert r.killed in (None, KillReason.CPU, KillReason.TIMEOUT), r
        after = sandbox.exec(["echo", "still here"])
        assert after.ok and after.stdout == "still here\n"


def _cpu_weight_of(pid: int) -> int | None:
    """The CPU weight of the cgroup the kernel has `pid` in (v2 cpu.weight; v1 cpu.shares as a weight)."""
    from gymsmith.sandbox import cgroups

    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "" and (cgroups.ROOT / path.lstrip("/") / "cpu.weight").exists():
            return int((cgroups.ROOT / path.lstrip("/") / "cpu.weight").read_text())
        if "cpu" in controllers.split(","):
            shares = cgroups.ROOT / "cpu" / path.lstrip("/") / "cpu.shares"
            return round(int(shares.read_text()) * 100 / 1024) if shares.exists() else None
    return None


def test_attack_starve_the_verifier_of_cpu(sb):
    """An eighty-fourth attacker filled both cores with 110 busy loops, each in a session of its own (so the
    scheduler's per-session groups did not hold them), while another rollout was verified: its reference missed 3
    times its limits, and 3 of 3 verifications (one of a correct fix) became infrastructure errors. Every process of
    an agent's sandbox, in any session, is in the sandbox's CPU group, whose weight is a tenth of the verifier's."""
    from gymsmith.sandbox.base import AGENT_CPU_WEIGHT, VERIFIER_CPU_WEIGHT
    from gymsmith.verifier.calltests.runner import CALL_LIMITS
    from gymsmith.verifier.pytest_runner import RUNNER_LIMITS

    assert sb.cgroup is not None and sb.cgroup.cpu_weight() == AGENT_CPU_WEIGHT == LIMITS.cpu_weight
    assert CALL_LIMITS.cpu_weight == RUNNER_LIMITS.cpu_weight == VERIFIER_CPU_WEIGHT >= 10 * AGENT_CPU_WEIGHT
    import threading

    sb.exec(["true"])  # the command server starts in this thread: bwrap dies with the thread that started it
    done = []
    command = threading.Thread(target=lambda: done.append(sb.exec(
        ["sh", "-c", "for i in 1 2 3 4; do setsid sh -c 'while :; do :; done' & done; sleep 5"], timeout=3)))
    command.start()
    try:
        weights: set[int | None] = set()
        for _ in range(100):  # the host's view of every process in the sandbox: 4 busy loops, each a session leader
            time.sleep(0.05)
            members = sb.cgroup.pids()
            if len(members) >= 6:  # bwrap, the command server, the shell and the loops
                weights = {_cpu_weight_of(p) for p in members}
                break
    finally:
        command.join()
    assert done[0].killed is KillReason.TIMEOUT
    assert weights == {AGENT_CPU_WEIGHT}


def test_attack_gain_privileges(sb):
    capabilities = ("import ctypes, struct\nhead, data = struct.pack('II', 0x20080522, 0), ctypes.create_string_buffer(24)"
                    "\nassert ctypes.CDLL(None).capget(head, data) == 0\nprint('CapEff:', struct.unpack('6I', data.raw)[0::3])")
    r = sb.exec(f"mount -t tmpfs none /usr 2>&1; su -c id 2>&1; id -u; python3 -c \"{capabilities}\"")
    assert "CapEff: (0, 0)" in r.stdout and "1000" in r.stdout.split(), r
    assert not os.path.ismount("/usr") or open("/proc/self/mounts").read().count(" /usr ") == 0


FIND_PYTHON = r'''
import os, sys, sysconfig, zipfile
stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
allowed = (stdlib + "/", "/workspace/", "/run/")
found = []
for root, dirs, files in os.walk("/", followlinks=False):
    dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys", "/dev")]
    for f in files:
        path = os.path.join(root, f)
        if f.endswith((".py", ".pyc", ".whl", ".egg", ".zip", ".tar.gz")) and not path.startswith(allowed) \
                and os.path.exists(path):  # a link into what is not mounted (an SDK's launcher) dangles
            found.append(path)
site = [p for p in sys.path if "packages" in p]
print(len(found), site)
print("\n".join(found[:40]))
'''


def test_attack_find_other_copies_of_python_packages(sb):
    """A host's /usr holds copies of Python packages (Debian's dist-packages, vendored libraries, wheels, SDKs):
    a task made from one of them could be solved by copying it (a red-team agent did, for six, more-itertools and
    inflection). In the sandbox the only Python source is the standard library (no bundled wheels, no test suite)
    and the runtime's own packages (mounted over site-packages); this walks the whole filesystem for any other."""
    r = sb.exec(["python3", "-c", FIND_PYTHON])
    assert r.ok, r
    count, *listed = [line for line in r.stdout.splitlines() if line]
    site = count.split(" ", 1)[1]
    runtime_packages = [p for p in listed if any(p.startswith(d.strip(" '[]") + "/") for d in site.split(","))]
    others = [p for p in listed if p not in runtime_packages]
    assert not others, others
    assert not sb.exec(["python3", "-c", "import six"]).ok  # the host has it; the sandbox must not
