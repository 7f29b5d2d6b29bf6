# SPDX-License-Identifier: GPL-2.0
"""A TCP service and its clients, for the breaker tests.

  tcpprobe.py serve PORT            accept and close on [::]:PORT (IPv4 too)
                                    until SIGTERM; "ready" on stderr
  tcpprobe.py connect HOST PORT N [--burst] [--align-ms MS] [--timeout S]
      N connects, one after another (or all at once with --burst), each
      reported as ok / rst (refused) / timeout with the time from connect()
      to its outcome in microseconds, as one JSON object on stdout;
      --align-ms waits for the start of a fresh window of CLOCK_MONOTONIC
      (the data plane's clock) first, plus 20 ms.
"""
import errno
import json
import select
import signal
import socket
import sys
import time


def serve(port):
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::", port))
    s.listen(128)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("ready", file=sys.stderr, flush=True)
    while True:
        c, _ = s.accept()
        c.close()


def family_of(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def one(host, port, timeout):
    s = socket.socket(family_of(host), socket.SOCK_STREAM)
    s.settimeout(timeout)
    t0 = time.perf_counter_ns()
    try:
        s.connect((host, port))
        out = "ok"
    except ConnectionRefusedError:
        out = "rst"
    except (socket.timeout, TimeoutError):
        out = "timeout"
    dt = (time.perf_counter_ns() - t0) // 1000
    s.close()
    return out, dt


def burst(host, port, n, timeout):
    socks, t0, res = [], {}, {}
    for _ in range(n):
        s = socket.socket(family_of(host), socket.SOCK_STREAM)
        s.setblocking(False)
        socks.append(s)
    for s in socks:
        t0[s] = time.perf_counter_ns()
        s.connect_ex((host, port))
    deadline = time.monotonic() + timeout
    left = list(socks)
    while left and time.monotonic() < deadline:
        _, w, _ = select.select([], left, [], deadline - time.monotonic())
        for s in w:
            e = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            out = "ok" if e == 0 else "rst" if e == errno.ECONNREFUSED \
                else "err%d" % e
            res[s] = (out, (time.perf_counter_ns() - t0[s]) // 1000)
            left.remove(s)
    for s in left:
        res[s] = ("timeout", int(timeout * 1e6))
    out = [res[s] for s in socks]
    for s in socks:
        s.close()
    return out


def main():
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
        return
    host, port, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    args = sys.argv[5:]
    timeout = float(args[args.index("--timeout") + 1]) \
        if "--timeout" in args else 0.5
    if "--align-ms" in args:
        ms = int(args[args.index("--align-ms") + 1]) * 1000000
        now = time.monotonic_ns()
        time.sleep(((now // ms + 1) * ms - now) / 1e9 + 0.02)
    if "--burst" in args:
        res = burst(host, port, n, timeout)
    else:
        res = [one(host, port, timeout) for _ in range(n)]
    print(json.dumps({"out": [r[0] for r in res], "us": [r[1] for r in res]}))


if __name__ == "__main__":
    main()
