# SPDX-License-Identifier: GPL-2.0
"""TCP and UDP services and their clients, for the breaker tests.

  tcpprobe.py serve PORT [--backlog N] [--no-accept]
      accept and close on [::]:PORT (IPv4 too) until SIGTERM; "ready" on
      stderr; --no-accept listens with backlog N and never accepts, so
      that once the accept queue is full the kernel drops new SYNs
  tcpprobe.py rr-serve PORT DELAY_FILE
      a request/response service: reads a line, sleeps the seconds
      DELAY_FILE holds (read at each request; 0 when empty), answers
  tcpprobe.py udp-serve PORT        echo datagrams on [::]:PORT
  tcpprobe.py connect HOST PORT N [--burst] [--align-ms MS] [--timeout S]
      N connects, one after another (or all at once with --burst), each
      reported as ok / rst (refused) / timeout with the time from connect()
      to its outcome in microseconds, as one JSON object on stdout;
      --align-ms waits for the start of a fresh window of CLOCK_MONOTONIC
      (the data plane's clock) first, plus 20 ms.
  tcpprobe.py rr HOST PORT N [--align-ms MS] [--timeout S]
      N requests, one connection each: ok (with the time from the request
      to the response), rst (refused) or timeout
  tcpprobe.py udp HOST PORT N [--align-ms MS] [--timeout S]
      N datagrams from a connected socket each: ok (echoed), rst (an ICMP
      port unreachable came back: ECONNREFUSED) or timeout
"""
import errno
import json
import select
import signal
import socket
import sys
import threading
import time


def listener(port, kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET6, kind)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::", port))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    return s


def serve(port, args):
    s = listener(port)
    if "--no-accept" in args:
        s.listen(int(opt(args, "--backlog", 0)))
        print("ready", file=sys.stderr, flush=True)
        while True:
            signal.pause()
    s.listen(128)
    print("ready", file=sys.stderr, flush=True)
    while True:
        c, _ = s.accept()
        c.close()


def rr_one(c, delay_file):
    try:
        c.recv(256)
        with open(delay_file) as f:
            time.sleep(float(f.read().strip() or 0))
        c.sendall(b"pong\n")
    except OSError:
        pass
    c.close()


def rr_serve(port, delay_file):
    s = listener(port)
    s.listen(128)
    print("ready", file=sys.stderr, flush=True)
    while True:
        c, _ = s.accept()
        threading.Thread(target=rr_one, args=(c, delay_file),
                         daemon=True).start()


def udp_serve(port):
    s = listener(port, socket.SOCK_DGRAM)
    print("ready", file=sys.stderr, flush=True)
    while True:
        data, peer = s.recvfrom(2048)
        s.sendto(data, peer)


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


def rr(host, port, timeout):
    s = socket.socket(family_of(host), socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect((host, port))
        t0 = time.perf_counter_ns()
        s.sendall(b"ping\n")
        out = "ok" if s.recv(256) else "closed"
    except ConnectionRefusedError:
        t0, out = time.perf_counter_ns(), "rst"
    except (socket.timeout, TimeoutError):
        t0, out = time.perf_counter_ns(), "timeout"
    dt = (time.perf_counter_ns() - t0) // 1000
    s.close()
    return out, dt


def udp(host, port, timeout):
    s = socket.socket(family_of(host), socket.SOCK_DGRAM)
    s.settimeout(timeout)
    s.connect((host, port))
    t0 = time.perf_counter_ns()
    try:
        s.send(b"ping")
        s.recv(2048)
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


def opt(args, name, default):
    return args[args.index(name) + 1] if name in args else default


def main():
    cmd = sys.argv[1]
    if cmd == "serve":
        serve(int(sys.argv[2]), sys.argv[3:])
        return
    if cmd == "rr-serve":
        rr_serve(int(sys.argv[2]), sys.argv[3])
        return
    if cmd == "udp-serve":
        udp_serve(int(sys.argv[2]))
        return
    host, port, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    args = sys.argv[5:]
    timeout = float(opt(args, "--timeout", 0.5))
    if "--align-ms" in args:
        ms = int(opt(args, "--align-ms", 0)) * 1000000
        now = time.monotonic_ns()
        time.sleep(((now // ms + 1) * ms - now) / 1e9 + 0.02)
    if cmd == "rr":
        res = [rr(host, port, timeout) for _ in range(n)]
    elif cmd == "udp":
        res = [udp(host, port, timeout) for _ in range(n)]
    elif "--burst" in args:
        res = burst(host, port, n, timeout)
    else:
        res = [one(host, port, timeout) for _ in range(n)]
    print(json.dumps({"out": [r[0] for r in res], "us": [r[1] for r in res]}))


if __name__ == "__main__":
    main()
