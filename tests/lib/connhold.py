# SPDX-License-Identifier: GPL-2.0
"""TCP connections held open, for the conns grade's tests.

  connhold.py serve PORT... [--idle S]
      accept on [::]:PORT (IPv4 too) for each PORT and hold every
      connection until its client closes it or, with --idle, until it
      has been silent S seconds (then the server closes it, as real
      servers time idle clients out); "ready" on stderr; until SIGTERM
  connhold.py open HOST PORT N RATE HOLD [--src ADDR] [--close fin|rst]
      open N connections at RATE a second (open loop), each held HOLD
      seconds with one byte sent a second, then closed (FIN, or RST by
      SO_LINGER 0); a connect waits 2 s at most. Prints one JSON object:
      established, refused (a RST answered the SYN), timed_out, and
      most_open (the most this client held at once)
  connhold.py count PORT SECONDS
      the server's established sockets on PORT (ss: the smaller of two
      dumps in a row), every 20 ms, for SECONDS; prints one JSON
      object: max, samples, last
"""
import asyncio
import json
import signal
import socket
import struct
import subprocess
import sys
import time


async def serve(ports, idle):
    async def handle(reader, writer):
        try:
            while True:
                data = await asyncio.wait_for(reader.read(4096), idle)
                if not data:
                    break
        except (asyncio.TimeoutError, ConnectionError):
            pass
        writer.close()

    servers = []
    for port in ports:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind(("::", port))
        s.listen(4096)
        servers.append(await asyncio.start_server(handle, sock=s))
    print("ready", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()


async def open_conns(host, port, n, rate, hold, src, close):
    res = {"established": 0, "refused": 0, "timed_out": 0, "most_open": 0}
    now_open = 0

    async def one():
        nonlocal now_open
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setblocking(False)
        if src:
            s.bind((src, 0))
        try:
            await asyncio.wait_for(
                asyncio.get_running_loop().sock_connect(s, (host, port)), 2)
        except ConnectionRefusedError:
            res["refused"] += 1
            s.close()
            return
        except (asyncio.TimeoutError, OSError):
            res["timed_out"] += 1
            s.close()
            return
        res["established"] += 1
        now_open += 1
        res["most_open"] = max(res["most_open"], now_open)
        end = time.monotonic() + hold
        try:
            while time.monotonic() < end:
                s.send(b"x")
                await asyncio.sleep(min(1.0, max(0, end - time.monotonic())))
        except OSError:
            pass
        now_open -= 1
        if close == "rst":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                         struct.pack("ii", 1, 0))
        s.close()

    tasks = []
    t0 = time.monotonic()
    for i in range(n):
        d = t0 + i / rate - time.monotonic()
        if d > 0:
            await asyncio.sleep(d)
        tasks.append(asyncio.create_task(one()))
    await asyncio.gather(*tasks)
    print(json.dumps(res))


def established(port):
    out = subprocess.run(
        ["ss", "-Htn", "state", "established", f"( sport = :{port} )"],
        capture_output=True, text=True).stdout
    return len(out.splitlines())


def count(port, seconds):
    # the smaller of two dumps in a row: one dump walks the socket table
    # bucket by bucket, not at one instant, and can count a closing
    # socket with the one that took its place; an excess that lasts (a
    # connection's life, 0.1 s and more here) shows in both
    most, samples, last = 0, 0, 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        last = min(established(port), established(port))
        most = max(most, last)
        samples += 1
        time.sleep(0.02)
    print(json.dumps({"max": most, "samples": samples, "last": last}))


def opt(args, name, default):
    if name in args:
        i = args.index(name)
        val = args[i + 1]
        del args[i:i + 2]
        return val
    return default


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    cmd = args.pop(0)
    if cmd == "serve":
        idle = float(opt(args, "--idle", "0")) or None
        asyncio.run(serve([int(p) for p in args], idle))
    elif cmd == "open":
        src = opt(args, "--src", None)
        close = opt(args, "--close", "fin")
        host, port, n, rate, hold = args
        asyncio.run(open_conns(host, int(port), int(n), float(rate),
                               float(hold), src, close))
    elif cmd == "count":
        count(int(args[0]), float(args[1]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
