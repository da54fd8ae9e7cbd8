"""A fork server for Debian's baremetal CLI (python3-ironicclient).

It imports the CLI once, then for each connection on its unix socket forks
a child that runs the CLI's own entry point, ironicclient.shell.main (what
/usr/bin/baremetal runs), with the request's arguments, environment and
directory, its standard output and error into memory files, and answers
with the exit status and both outputs. Only the interpreter's start and the
imports are shared between runs: every run builds the client anew from its
own environment, as a fresh /usr/bin/baremetal does.

Request: one JSON line {"args": [...], "env": {...}, "dir": "..."}.
Answer: one JSON line {"exit": N, "stdout": "...", "stderr": "..."}.
A closed connection before the answer kills the run.
"""

import json
import os
import select
import signal
import socket
import sys
import traceback

SOCKET = sys.argv[1] if len(sys.argv) > 1 else None
sys.argv = ["baremetal"]
from ironicclient import shell  # noqa: E402

# Warm what the first command of a fresh CLI pays for: the command
# entry points, the SDK's configuration loader, the client modules.
try:
    shell.App()
except Exception:  # noqa: BLE001 -- warming only; a real run reports it
    pass
for name in ("ironicclient.v1.client", "ironicclient.osc.v1.baremetal_node",
             "ironicclient.osc.v1.baremetal_port", "keystoneauth1.session",
             "openstack.config", "osc_lib.utils", "cliff.formatters.table",
             "cliff.formatters.value", "cliff.formatters.json_format"):
    try:
        __import__(name)
    except Exception:  # noqa: BLE001
        pass


def run_cli(req):
    """The grandchild: the CLI's own entry point, then exit with its status."""
    os.environ.clear()
    os.environ.update(req.get("env") or {})
    os.chdir(req.get("dir") or "/")
    args = list(req.get("args") or [])
    sys.argv = ["baremetal"] + args
    code = 0
    try:
        code = shell.main(args)
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 -- as the interpreter would report it
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code if isinstance(code, int) and 0 <= code < 256 else 1)


def serve_one(conn):
    """The child: one request, its grandchild, one answer."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            os._exit(0)
        data += chunk
    req = json.loads(data)
    out = os.memfd_create("stdout")
    err = os.memfd_create("stderr")
    pid = os.fork()
    if pid == 0:
        conn.close()
        os.dup2(out, 1)
        os.dup2(err, 2)
        run_cli(req)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        readable, _, _ = select.select([conn], [], [], 0.05)
        if readable and not conn.recv(1):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os._exit(0)

    def contents(fd):
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                return b"".join(chunks).decode("utf-8", "replace")
            chunks.append(b)

    answer = {"exit": os.waitstatus_to_exitcode(status),
              "stdout": contents(out), "stderr": contents(err)}
    conn.sendall(json.dumps(answer).encode() + b"\n")
    conn.close()
    os._exit(0)


def main():
    path = SOCKET
    if path is None:
        print("usage: forkserver.py SOCKET", file=sys.stderr)
        return 2
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(128)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    print("ready", flush=True)
    # The test process holds our standard input: when it ends, so do we.
    while True:
        readable, _, _ = select.select([srv, sys.stdin], [], [])
        if sys.stdin in readable and not os.read(0, 1):
            os.unlink(path)
            return 0
        if srv not in readable:
            continue
        conn, _ = srv.accept()
        if os.fork() == 0:
            srv.close()
            # Not the test process's pipe: /dev/null in its place.
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            serve_one(conn)
        conn.close()


if __name__ == "__main__":
    sys.exit(main())
