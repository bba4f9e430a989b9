#!/usr/bin/env python3
"""Malformed and hostile HTTP against the real extender.

    http_hostile.py EXTENDER [CASE...]

Starts EXTENDER on configs/demo-cluster.yaml, listening on 127.0.0.1:0, and
runs each case (all by default) against it:

  idle_connections     300 connections from 30 addresses, 200 silent and 100
                       sending a request head a byte at a time: /healthz and
                       real /filter requests are answered within 2 s, on new
                       and on keep-alive connections, and none of the 300 is
                       dropped (they are within the limits)
  one_client_flood     1100 silent connections from one address: requests from
                       another are answered within 2 s, and the server keeps
                       at most maxConnectionsPerClient (128) of the flood open
  silent_timeout       with connectionTimeoutSeconds: 2, silent connections and
                       idle keep-alive ones are closed within 2 + 3 s
  announced_body       50 requests that announce a 60 MB body and send 100
                       bytes: the server's address space grows by less than
                       256 MiB (it does not allocate what is only announced)
  oversized_headers    a 100 KB header, 10000 headers, a 100 KB URL: 431, 431
                       and 414 (400 also accepted), and the service stays up
  nested_json          100000 '[' or '{"a":' to every verb: 400 with a JSON
                       error naming the nesting limit (filter, prioritize,
                       bind) or bad_json (preempt); 999 levels: 400, no crash
  pipelined            seven requests in one write on a keep-alive connection,
                       then the same cut into 7-byte writes: every reply
                       correct and in order, the connection still usable

and at the end checks that the process is alive and answers /healthz and a
real /filter. Standard library only; everything is on loopback, and the
other client addresses are 127.0.x.y (Linux routes all of 127/8 to lo). Each
case prints "ok" or "FAIL: why"; the exit status is 1 if any failed.
"""
import json
import os
import re
import resource
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SNAPSHOT = os.path.join(ROOT, "configs", "demo-cluster.yaml")
PROMPT_S = 2.0  # an answer later than this fails
PER_CLIENT = 128  # maxConnectionsPerClient's default (configs/flextopo.yaml)
DEMO_NODES = ["demo-rtx4090-0", "demo-a100-0", "demo-h100-0", "demo-broken-0"]


class Failure(Exception):
    pass


def check(cond, why):
    if not cond:
        raise Failure(why)


# ---- the extender ----


class Extender:
    """The binary on the demo snapshot; `config` is extra YAML."""

    def __init__(self, binary, config=""):
        self.dir = tempfile.TemporaryDirectory(prefix="http-hostile-")
        cfg = os.path.join(self.dir.name, "flextopo.yaml")
        with open(cfg, "w") as f:
            f.write("logLevel: info\n" + config)
        self.log_path = os.path.join(self.dir.name, "extender.log")
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen(
            [binary, "--config", cfg, "--snapshot", SNAPSHOT, "--listen", "127.0.0.1:0"],
            stdout=self.log, stderr=self.log)
        self.port = self.wait_for_port()

    def wait_for_port(self):
        pattern = re.compile(r"serving the extender API on 127\.0\.0\.1:0 \(port (\d+)\)")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with open(self.log_path) as f:
                m = pattern.search(f.read())
            if m:
                return int(m.group(1))
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        tail = self.log_tail()
        self.stop()
        raise Failure("the extender did not start:\n" + tail)

    def log_tail(self, lines=10):
        with open(self.log_path) as f:
            return "".join(f.readlines()[-lines:])

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        self.dir.cleanup()

    def vm_size_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1])
        raise Failure("no VmSize for the extender")


# ---- a minimal HTTP/1.1 client on raw sockets ----


def connect(port, source="127.0.0.1", timeout=PROMPT_S):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def request_bytes(method, path, body=None, headers=None, close=False):
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: extender"]
    if body is not None:
        lines += ["Content-Type: application/json", "Content-Length: %d" % len(body)]
    lines += headers or []
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


def read_reply(f):
    """(status, headers, body) of the next reply on file `f`."""
    line = f.readline()
    check(line.startswith(b"HTTP/1.1 "), "expected a status line, got %r" % line[:80])
    status = int(line.split()[1])
    headers = {}
    while True:
        line = f.readline()
        check(line, "connection closed inside a reply's headers")
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    body = f.read(int(headers.get("content-length", "0")))
    return status, headers, body


def exchange(sock, data):
    """Send `data` (one request) and read its reply, within PROMPT_S."""
    start = time.monotonic()
    sock.sendall(data)
    reply = read_reply(sock.makefile("rb"))
    took = time.monotonic() - start
    check(took < PROMPT_S, "answered after %.2f s" % took)
    return reply


def fresh(port, method, path, body=None):
    """One request on a new connection, answered within PROMPT_S."""
    start = time.monotonic()
    try:
        s = connect(port)
        try:
            reply = exchange(s, request_bytes(method, path, body, close=True))
        finally:
            s.close()
    except (socket.timeout, ConnectionError) as e:
        raise Failure("%s %s: no answer within %.1f s (%s after %.2f s)" %
                      (method, path, PROMPT_S, type(e).__name__, time.monotonic() - start))
    return reply


def filter_body(name="hostile-test"):
    pod = {
        "metadata": {"name": name, "namespace": "default", "uid": "uid-" + name,
                     "annotations": {"flextopo.io/affinity": "nvlink"}},
        "spec": {"containers": [{"name": "main", "resources": {
            "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "2"},
            "limits": {"nvidia.com/gpu": "2"}}}]},
    }
    return json.dumps({"Pod": pod, "Nodes": None, "NodeNames": DEMO_NODES}).encode()


def check_filter_reply(reply):
    status, _, body = reply
    check(status == 200, "/filter: status %d: %r" % (status, body[:200]))
    result = json.loads(body)
    passed = result.get("NodeNames") or []
    check("demo-a100-0" in passed, "/filter: demo-a100-0 should pass: %r" % result)
    check("demo-broken-0" not in passed, "/filter: demo-broken-0 should not pass")


def check_serving(port):
    status, _, body = fresh(port, "GET", "/healthz")
    check(status == 200, "/healthz: status %d" % status)
    check_filter_reply(fresh(port, "POST", "/filter", filter_body()))


# ---- holding many connections ----


def raise_fd_limit(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def closed_by_server(socks, wait):
    """How many of `socks` the server closes within `wait` seconds."""
    poller = select.poll()
    by_fd = {s.fileno(): s for s in socks}
    for fd in by_fd:
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    closed = set()
    deadline = time.monotonic() + wait
    while len(closed) < len(by_fd):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        for fd, _ in poller.poll(int(left * 1000)):
            closed.add(fd)
            poller.unregister(fd)
    return len(closed)


class Slowloris(threading.Thread):
    """Sends a request head one byte per `interval` on each socket."""

    HEAD = b"POST /filter HTTP/1.1\r\nHost: extender\r\nContent-Type: application/json\r\n"

    def __init__(self, socks, interval=0.2):
        super().__init__(daemon=True)
        self.socks, self.interval = socks, interval
        self.stopping = threading.Event()

    def run(self):
        for i in range(len(self.HEAD)):
            for s in self.socks:
                try:
                    s.send(self.HEAD[i:i + 1])
                except OSError:
                    pass
            if self.stopping.wait(self.interval):
                return

    def stop(self):
        self.stopping.set()
        self.join()


def close_all(socks):
    for s in socks:
        s.close()


# ---- cases ----


def case_idle_connections(binary):
    ext = Extender(binary)
    socks = []
    loris = None
    try:
        raise_fd_limit(1024)
        for i in range(300):
            socks.append(connect(ext.port, "127.0.1.%d" % (1 + i % 30)))
        loris = Slowloris(socks[200:])
        loris.start()
        time.sleep(0.5)
        check_serving(ext.port)
        keep = connect(ext.port)
        try:
            for _ in range(5):
                check_filter_reply(exchange(keep, request_bytes("POST", "/filter", filter_body())))
        finally:
            keep.close()
        dropped = closed_by_server(socks, 0.5)
        check(dropped == 0, "%d of the 300 connections were dropped" % dropped)
    finally:
        if loris:
            loris.stop()
        close_all(socks)
        ext.stop()


def case_one_client_flood(binary):
    n = 1100
    have = raise_fd_limit(n + 200)
    if have < n + 100:
        n = have - 100
        print("  (RLIMIT_NOFILE allows %d sockets only: flooding with %d)" % (have, n))
    ext = Extender(binary)
    socks = []
    try:
        for _ in range(n):
            socks.append(connect(ext.port, "127.0.0.2"))
        time.sleep(0.3)
        check_serving(ext.port)
        open_ = n - closed_by_server(socks, 1.0)
        check(open_ <= PER_CLIENT,
              "%d of %d connections from one address kept open (at most %d)" %
              (open_, n, PER_CLIENT))
        check_serving(ext.port)
    finally:
        close_all(socks)
        ext.stop()


def case_silent_timeout(binary):
    ext = Extender(binary, "connectionTimeoutSeconds: 2\n")
    socks = []
    try:
        socks = [connect(ext.port, "127.0.2.1") for _ in range(20)]
        used = connect(ext.port)
        socks.append(used)
        status, _, _ = exchange(used, request_bytes("GET", "/healthz"))
        check(status == 200, "/healthz: status %d" % status)
        start = time.monotonic()
        closed = closed_by_server(socks, 5.0)
        check(closed == len(socks), "%d of %d silent connections still open after %.1f s" %
              (len(socks) - closed, len(socks), time.monotonic() - start))
        check_serving(ext.port)
    finally:
        close_all(socks)
        ext.stop()


def case_announced_body(binary):
    ext = Extender(binary)
    socks = []
    try:
        check_serving(ext.port)
        before = ext.vm_size_kib()
        head = (b"POST /filter HTTP/1.1\r\nHost: extender\r\nContent-Type: application/json\r\n"
                b"Content-Length: 60000000\r\n\r\n" + b" " * 100)
        for i in range(50):
            s = connect(ext.port, "127.0.3.%d" % (1 + i % 5))
            s.sendall(head)
            socks.append(s)
        time.sleep(0.5)
        grown = (ext.vm_size_kib() - before) // 1024
        check(grown < 256, "address space grew by %d MiB for 50 announced bodies" % grown)
        check_serving(ext.port)
    finally:
        close_all(socks)
        ext.stop()


def raw_reply(port, data):
    s = connect(port, timeout=5)
    try:
        s.sendall(data)
    except OSError:
        pass  # the server may answer and close before reading everything
    try:
        return read_reply(s.makefile("rb"))
    finally:
        s.close()


def case_oversized_headers(binary):
    ext = Extender(binary)
    try:
        big = request_bytes("GET", "/healthz", headers=["X-Big: " + "a" * 100000], close=True)
        status, _, _ = raw_reply(ext.port, big)
        check(status in (431, 400), "a 100 KB header: status %d" % status)
        many = request_bytes("GET", "/healthz",
                             headers=["X-H%d: v" % i for i in range(10000)], close=True)
        status, _, _ = raw_reply(ext.port, many)
        check(status in (431, 400), "10000 headers: status %d" % status)
        url = request_bytes("GET", "/" + "a" * 100000, close=True)
        status, _, _ = raw_reply(ext.port, url)
        check(status in (414, 431, 400), "a 100 KB URL: status %d" % status)
        check_serving(ext.port)
    finally:
        ext.stop()


def expect_json_error(reply, what, status, contains):
    got, headers, body = reply
    check(got == status, "%s: status %d, expected %d: %r" % (what, got, status, body[:200]))
    check(headers.get("content-type", "").startswith("application/json"),
          "%s: Content-Type %r" % (what, headers.get("content-type")))
    error = json.loads(body).get("error", "")
    check(contains in error, "%s: error %r does not say %r" % (what, error, contains))


def case_nested_json(binary):
    ext = Extender(binary)
    try:
        deep = {"arrays": b"[" * 100000, "objects": b'{"a":' * 100000}
        for verb in ("filter", "prioritize", "bind", "preempt"):
            said = "nested deeper than 1000 levels" if verb != "preempt" else "bad_json"
            for kind, body in deep.items():
                reply = fresh(ext.port, "POST", "/" + verb, body)
                expect_json_error(reply, "/%s, 100000 nested %s" % (verb, kind), 400, said)
        under = b"[" * 999 + b"]" * 999
        for verb in ("filter", "preempt"):
            reply = fresh(ext.port, "POST", "/" + verb, under)
            expect_json_error(reply, "/%s, 999 nested arrays" % verb, 400, "bad_json")
        check_serving(ext.port)
    finally:
        ext.stop()


def pipeline():
    """Requests and a check of each reply, in order."""
    def status_is(want, contains=None):
        def check_reply(reply, what):
            status, _, body = reply
            check(status == want, "%s: status %d, expected %d" % (what, status, want))
            if contains:
                check(contains in body, "%s: %r not in %r" % (what, contains, body[:200]))
        return check_reply

    def filter_ok(reply, what):
        check_filter_reply(reply)

    def prioritize_ok(reply, what):
        status, _, body = reply
        check(status == 200, "%s: status %d" % (what, status))
        hosts = [p["Host"] for p in json.loads(body)]
        check(hosts == DEMO_NODES, "%s: hosts %r" % (what, hosts))

    return [
        (request_bytes("GET", "/healthz"), status_is(200, b"ok")),
        (request_bytes("POST", "/filter", filter_body("pipe-1")), filter_ok),
        (request_bytes("GET", "/version"), status_is(200, b'"version"')),
        (request_bytes("POST", "/prioritize", filter_body("pipe-2")), prioritize_ok),
        (request_bytes("GET", "/nope"), status_is(404, b"not_found")),
        (request_bytes("POST", "/filter", b'{"Pod":'), status_is(400, b"bad_json")),
        (request_bytes("GET", "/readyz"), status_is(200)),
    ]


def run_pipeline(port, piece):
    steps = pipeline()
    data = b"".join(req for req, _ in steps)
    s = connect(port, timeout=5)
    try:
        for i in range(0, len(data), piece or len(data)):
            s.sendall(data[i:i + (piece or len(data))])
        f = s.makefile("rb")
        for n, (_, check_reply) in enumerate(steps):
            check_reply(read_reply(f), "pipelined reply %d (%s writes)" %
                        (n + 1, "%d-byte" % piece if piece else "one"))
        status, _, _ = exchange(s, request_bytes("GET", "/healthz"))
        check(status == 200, "after the pipeline: /healthz status %d" % status)
    finally:
        s.close()


def case_pipelined(binary):
    ext = Extender(binary)
    try:
        run_pipeline(ext.port, 0)
        run_pipeline(ext.port, 7)
    finally:
        ext.stop()


CASES = {
    "idle_connections": case_idle_connections,
    "one_client_flood": case_one_client_flood,
    "silent_timeout": case_silent_timeout,
    "announced_body": case_announced_body,
    "oversized_headers": case_oversized_headers,
    "nested_json": case_nested_json,
    "pipelined": case_pipelined,
}


def main():
    if len(sys.argv) < 2 or any(c not in CASES for c in sys.argv[2:]):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    binary = sys.argv[1]
    failed = []
    for name in sys.argv[2:] or CASES:
        start = time.monotonic()
        try:
            CASES[name](binary)
            print("ok   %s (%.1f s)" % (name, time.monotonic() - start), flush=True)
        except (Failure, OSError, ValueError) as e:
            failed.append(name)
            print("FAIL %s (%.1f s): %s" % (name, time.monotonic() - start, e), flush=True)
    if failed:
        print("http_hostile: %d of %d cases failed: %s" %
              (len(failed), len(sys.argv[2:] or CASES), ", ".join(failed)))
        sys.exit(1)


if __name__ == "__main__":
    main()
