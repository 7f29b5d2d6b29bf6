# SPDX-License-Identifier: GPL-2.0
"""A TCP service of known capacity, an open-loop load of connections and
a sampler of its accept queue, for the adaptive protection tests.

  connload.py serve PORT RATE BACKLOG
      listen on [::]:PORT (IPv4 too) with BACKLOG, accept RATE
      connections per second (each closed at once) until SIGTERM;
      "ready" on stderr
  connload.py load HOST PORT RATE SECONDS
      start RATE connects per second for SECONDS (open loop: a connect
      does not wait for the last); each is given up after 0.9 s, before
      the kernel would send the SYN again, so every attempt is one SYN.
      Prints one JSON object: attempts, established, given_up, refused,
      and established per whole second from the start
  connload.py queue PORT SECONDS
      the LISTEN socket's accept queue on PORT, from /proc/net/tcp and
      tcp6, every 20 ms; prints one JSON object: samples [[t, queue]...]
"""
import json
import selectors
import signal
import socket
import sys
import time


def serve(port, rate, backlog):
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::", port))
    s.listen(backlog)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("ready", file=sys.stderr, flush=True)
    nxt = time.monotonic()
    while True:
        c, _ = s.accept()
        c.close()
        # one accept per 1/rate s; a late one does not bank credit
        nxt = max(nxt + 1.0 / rate, time.monotonic() - 1.0 / rate)
        d = nxt - time.monotonic()
        if d > 0:
            time.sleep(d)


def load(host, port, rate, seconds):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    sel = selectors.DefaultSelector()
    t0 = time.monotonic()
    res = {"attempts": 0, "established": 0, "given_up": 0, "refused": 0}
    per_s = [0] * (int(seconds) + 2)
    pending = {}  # socket -> start

    def finish(s, outcome, now):
        sel.unregister(s)
        del pending[s]
        s.close()
        res[outcome] += 1
        if outcome == "established":
            per_s[min(int(now - t0), len(per_s) - 1)] += 1

    while True:
        now = time.monotonic()
        due = min(int((now - t0) * rate), int(seconds * rate))
        while res["attempts"] < due:
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect_ex((host, port))
            sel.register(s, selectors.EVENT_WRITE)
            pending[s] = now
            res["attempts"] += 1
        for key, _ in sel.select(timeout=0.002):
            s = key.fileobj
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            finish(s, "established" if err == 0 else "refused", now)
        now = time.monotonic()
        for s, start in list(pending.items()):
            if now - start > 0.9:
                finish(s, "given_up", now)
        if now - t0 >= seconds and not pending:
            break
    res["per_second"] = per_s[:int(seconds)]
    print(json.dumps(res))


def listen_queue(port):
    q = None
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(path) as f:
            next(f)
            for line in f:
                p = line.split()
                local, st, queues = p[1], p[3], p[4]
                if st == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    q = (q or 0) + int(queues.split(":")[1], 16)
    return q


def queue(port, seconds):
    t0 = time.monotonic()
    out = []
    while time.monotonic() - t0 < seconds:
        out.append([round(time.monotonic() - t0, 3), listen_queue(port)])
        time.sleep(0.02)
    print(json.dumps({"samples": out}))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "serve":
        serve(int(args[0]), float(args[1]), int(args[2]))
    elif cmd == "load":
        load(args[0], int(args[1]), float(args[2]), float(args[3]))
    elif cmd == "queue":
        queue(int(args[0]), float(args[1]))
    else:
        sys.exit(f"unknown command {cmd}")
