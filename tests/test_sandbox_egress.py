"""Network egress: none by default; with an allowlist, only listed host:port pairs, through the proxy, logged."""

from __future__ import annotations

import http.server
import threading

import pytest

from gymsmith.sandbox import open_sandbox
from gymsmith.sandbox.egress import parse_allow


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = f"hello from {self.server.server_address[1]}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture()
def two_servers():
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello) for _ in range(2)]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield [s.server_address[1] for s in servers]
    for s in servers:
        s.shutdown()
        s.server_close()


FETCH = "import sys, urllib.request\ntry:\n    print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())\n" \
        "except Exception as e:\n    print('FAILED', e)"


def test_listed_server_is_reachable_and_unlisted_is_refused_and_logged(tmp_path, two_servers):
    allowed, other = two_servers
    with open_sandbox(tmp_path, allow=[f"127.0.0.1:{allowed}"]) as sb:
        ok = sb.exec(["python3", "-c", FETCH, f"http://127.0.0.1:{allowed}/"])
        refused = sb.exec(["python3", "-c", FETCH, f"http://127.0.0.1:{other}/"])
        direct = sb.exec(["python3", "-c", "import socket; socket.create_connection(('127.0.0.1', %d), timeout=3)" % allowed])
        assert ok.stdout.strip() == f"hello from {allowed}"
        assert "FAILED HTTP Error 403" in refused.stdout
        assert direct.exit_code != 0  # without the proxy there is no route: the proxy is the only way out
        log = sb.proxy.events
        assert [e.target for e in log if e.allowed] == [f"127.0.0.1:{allowed}"]
        assert [e.target for e in sb.proxy.refused()] == [f"127.0.0.1:{other}"]
        assert "egress proxy allowing" in sb.enforced()["network"]


def test_no_allowlist_means_no_network_at_all(tmp_path, two_servers):
    with open_sandbox(tmp_path) as sb:
        r = sb.exec(["python3", "-c", FETCH, f"http://127.0.0.1:{two_servers[0]}/"])
        assert r.stdout.startswith("FAILED") and sb.enforced()["network"].startswith("empty namespace")


@pytest.mark.parametrize("entry", ["localhost", "host:port", ":80", "h:0", "h:70000"])
def test_bad_allowlist_entries_name_the_entry(entry):
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_allow(entry)
