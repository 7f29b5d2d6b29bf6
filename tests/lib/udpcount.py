#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Count datagrams where the stack delivers them: UDP sockets bound to
ADDR on each PORT, counted by "PORT SRC/24" (IPv4), until 2 s pass
without one; prints the counts as one JSON object. "ready" on stderr
once the sockets are bound."""
import collections
import json
import select
import socket
import sys

addr, ports = sys.argv[1], [int(p) for p in sys.argv[2:]]
socks = []
for port in ports:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.bind((addr, port))
    socks.append(s)
print("ready", file=sys.stderr, flush=True)
n = collections.Counter()
while True:
    ready, _, _ = select.select(socks, [], [], 2)
    if not ready:
        break
    for s in ready:
        _, (src, _) = s.recvfrom(2048)
        n["%d %s" % (s.getsockname()[1], src.rsplit(".", 1)[0])] += 1
print(json.dumps(n))
