"""A seccomp filter for every sandbox: the kernel's key management is refused.

Namespaces give a sandbox its own processes, mounts, IPC, network and users, but the kernel's keys (`add_key`,
`request_key`, `keyctl`) are kept per uid of the host, whatever the namespace: a key one sandbox links into its
uid's session keyring and makes readable is read by any later sandbox of that uid. A red-team payload did exactly
that: a correct rollout's code, run by the verifier, left its answers in a key, and a later rollout of the same
task that kept the bug read them back from inside the verifier's package process and was accepted. Keys are also
charged to the host uid's quota and outlive every sandbox. Nothing a sandboxed program needs uses them, so the
three calls fail with EPERM in every sandbox and in everything it starts (a seccomp filter is inherited across
fork and exec and cannot be removed).

The program is classic BPF, written out here (no libseccomp): check the architecture, then the call number.
A process of another architecture (a 32-bit program on a 64-bit host, x32 calls) is killed, since its call
numbers differ.
"""

from __future__ import annotations

import platform
import struct

BLOCKED = ("add_key", "request_key", "keyctl")
# AUDIT_ARCH value and the call numbers of BLOCKED, per machine
_ARCH = {
    "x86_64": (0xC000003E, (248, 249, 250)),
    "aarch64": (0xC00000B7, (217, 218, 219)),
}
_X32_BIT = 0x40000000  # x86_64: call numbers with this bit are the x32 ABI's

# classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_EPERM = 1
_NR, _ARCH_OFFSET = 0, 4  # offsets in struct seccomp_data


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def supported() -> bool:
    """Whether this machine has a filter (x86_64 and aarch64 do)."""
    return platform.machine() in _ARCH


def deny_keys_program(machine: str | None = None) -> bytes:
    """The filter as bubblewrap's `--seccomp FD` reads it: an array of `struct sock_filter`. Raises ValueError for
    a machine it has no call numbers for (`supported()`)."""
    machine = machine or platform.machine()
    if machine not in _ARCH:
        raise ValueError(f"no seccomp filter for machine {machine!r} (known: {', '.join(sorted(_ARCH))})")
    arch, numbers = _ARCH[machine]
    # layout: [load arch, arch check, load nr, x32 check?, one JEQ per blocked call, allow, deny, kill]
    checks = len(numbers)
    x32 = machine == "x86_64"
    body = [_op(_LD_W_ABS, _ARCH_OFFSET)]
    between = 1 + int(x32) + checks + 2  # instructions between the arch check and the kill: its jump offset
    body.append(_op(_JEQ_K, arch, jt=0, jf=between))  # foreign architecture -> kill
    body.append(_op(_LD_W_ABS, _NR))
    if x32:
        body.append(_op(_JGE_K, _X32_BIT, jt=checks + 2, jf=0))  # an x32 call -> kill
    for i, nr in enumerate(numbers):
        body.append(_op(_JEQ_K, nr, jt=checks - i, jf=0))  # -> deny
    body.append(_op(_RET_K, _RET_ALLOW))
    body.append(_op(_RET_K, _RET_ERRNO | _EPERM))
    body.append(_op(_RET_K, _RET_KILL_PROCESS))
    return b"".join(body)
