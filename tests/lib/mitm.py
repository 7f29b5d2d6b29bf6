#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""What an attacker can do to an agent's token sessions, for
tests/integration/test_cluster_trust.sh. Frames as in docs/protocol.md.

  mitm.py impostor LISTEN            a token server without the secret
  mitm.py tamper LISTEN UPSTREAM N   relay; flip the low bit of the first
                                     grant of the Nth GRANTS frame
  mitm.py replay LISTEN UPSTREAM N   relay; send the 1st GRANTS frame
                                     again in place of the Nth

LISTEN and UPSTREAM are HOST:PORT. The impostor answers HELLO with a
CHALLENGE and AUTH with an AUTH_OK, and every SYNC with a grant of 900
for each flow, all sealed with a key it had to guess. Each connection is
attacked anew; what was done is logged on stderr, one line per frame.
"""
import os
import socket
import struct
import sys
import threading

HDR = 12
SEAL = 40
GRANTS = 6


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def hostport(s):
    host, port = s.rsplit(":", 1)
    return host, int(port)


def read_frame(sock):
    head = b""
    while len(head) < 4:
        b = sock.recv(4 - len(head))
        if not b:
            return None
        head += b
    n = struct.unpack(">I", head)[0]
    body = b""
    while len(body) < n - 4:
        b = sock.recv(n - 4 - len(body))
        if not b:
            return None
        body += b
    return head + body


def sealed(frame_type, req, body, seq):
    """A frame with a seal of the right shape and a guessed MAC."""
    n = HDR + len(body) + SEAL
    return (struct.pack(">IBBHI", n, 2, frame_type, 1, req) + body +
            struct.pack(">Q", seq) + os.urandom(32))


def impostor(conn):
    seq = 0
    while True:
        f = read_frame(conn)
        if f is None:
            return
        ftype, req = f[5], struct.unpack(">I", f[8:12])[0]
        if ftype == 1:  # HELLO
            conn.sendall(struct.pack(">IBBHI", HDR + 32, 2, 2, 0, req) +
                         os.urandom(32))
        elif ftype == 3:  # AUTH: accepted without a look
            conn.sendall(sealed(4, req, struct.pack(">IIQ", 10000, 100, 0),
                                seq))
            seq += 1
            log("impostor: AUTH_OK sent")
        elif ftype == 5:  # SYNC: 900 for every flow
            count = struct.unpack(">I", f[HDR:HDR + 4])[0]
            entries = b""
            for i in range(count):
                flow = f[HDR + 4 + 28 * i:HDR + 8 + 28 * i]
                entries += flow + struct.pack(">IQII", 10000, 900, 1, 0)
            body = struct.pack(">HHIIQ", 0, 0, 10000, count, 0) + entries
            conn.sendall(sealed(6, req, body, seq))
            seq += 1
            log("impostor: GRANTS sent")


def pump(src, dst, attack=None):
    first = None
    nth = 0
    try:
        while True:
            f = read_frame(src)
            if f is None:
                break
            if attack and f[5] == GRANTS:
                nth += 1
                mode, n = attack
                if first is None:
                    first = f
                if nth == n and mode == "tamper":
                    b = bytearray(f)
                    # the grant's low byte of the first entry, or the TTL
                    at = HDR + 20 + 15 if len(b) > HDR + 20 + SEAL else HDR + 7
                    b[at] ^= 1
                    f = bytes(b)
                    log("tamper: GRANTS %d: one bit flipped" % nth)
                elif nth == n and mode == "replay":
                    f = first
                    log("replay: GRANTS 1 sent again as %d" % nth)
            dst.sendall(f)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def relay(conn, upstream, attack):
    try:
        up = socket.create_connection(upstream, timeout=5)
    except OSError:
        conn.close()
        return
    up.settimeout(None)
    t = threading.Thread(target=pump, args=(conn, up), daemon=True)
    t.start()
    pump(up, conn, attack)
    t.join()
    conn.close()
    up.close()


def main():
    mode = sys.argv[1]
    srv = socket.create_server(hostport(sys.argv[2]), reuse_port=False)
    log("ready")
    while True:
        conn, _ = srv.accept()
        if mode == "impostor":
            target, args = impostor, (conn,)
        else:
            target = relay
            args = (conn, hostport(sys.argv[3]), (mode, int(sys.argv[4])))
        threading.Thread(target=target, args=args, daemon=True).start()


if __name__ == "__main__":
    main()
