"""A throwaway PostgreSQL server in a temporary directory on a loopback port, for tests and benchmarks.

Uses the server binaries of the Debian package `postgresql` (which `make setup` installs). PostgreSQL
refuses to run as root, so as root the server runs as the `postgres` user that the package creates.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from gymsmith.core.errors import StoreError


def _server_binaries() -> tuple[str, str]:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    initdb = shutil.which("initdb") or (candidates[0] if candidates else None)
    if not initdb:
        raise StoreError("PostgreSQL server binaries not found; install the Debian package postgresql (make setup does)")
    bindir = os.path.dirname(os.path.realpath(initdb))
    return os.path.join(bindir, "initdb"), os.path.join(bindir, "pg_ctl")


class TemporaryPostgres:
    """``with TemporaryPostgres() as url:`` — a fresh server, stopped and deleted on exit."""

    def __init__(self) -> None:
        self.initdb, self.pg_ctl = _server_binaries()
        self.root: Path | None = None

    def _as_server_user(self, cmd: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd

    def __enter__(self) -> str:
        self.root = Path(tempfile.mkdtemp(prefix="gymsmith-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
        data = self.root / "data"
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            subprocess.run(self._as_server_user([self.initdb, "-D", str(data), "-U", "gymsmith", "--auth=trust",
                                                 "-E", "UTF8"]), check=True, capture_output=True, text=True)
            opts = f"-p {port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=100 -c fsync=off"
            subprocess.run(self._as_server_user([self.pg_ctl, "-D", str(data), "-o", opts, "-l", str(self.root / "log"),
                                                 "-w", "start"]), check=True, capture_output=True, text=True)
        except subprocess.CalledProcessError as exc:
            shutil.rmtree(self.root, ignore_errors=True)
            raise StoreError(f"could not start a temporary PostgreSQL server: {exc.stderr.strip()[-500:]}") from None
        return f"postgresql://gymsmith@127.0.0.1:{port}/postgres"

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        assert self.root is not None
        subprocess.run(self._as_server_user([self.pg_ctl, "-D", str(self.root / "data"), "-m", "immediate", "stop"]),
                       capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)
