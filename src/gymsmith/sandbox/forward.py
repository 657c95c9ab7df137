"""Runs inside a sandbox (standard library only): listen on 127.0.0.1:PORT, relay each connection to the
egress proxy's unix socket, then exec the real command. Usage: forward.py PORT SOCKET -- CMD...

The listening socket exists before the command starts, so the command never races it; the relay dies
with the sandbox's pid namespace when the command ends.
"""

import os
import socket
import sys
import threading


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def relay(client, path):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        return
    threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
    pump(client, upstream)


def main():
    port, path, sep, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    if sep != "--" or not cmd:
        sys.exit("usage: forward.py PORT SOCKET -- CMD...")
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(64)
    if os.fork() == 0:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # do not hold the command's output pipes open
            os.dup2(null, fd)
        while True:
            client, _ = server.accept()
            threading.Thread(target=relay, args=(client, path), daemon=True).start()
    server.close()
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    main()
