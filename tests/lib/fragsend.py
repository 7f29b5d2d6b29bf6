#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Raw frames of the fragment evasions (tests/integration/test_fragments.sh),
sent on an AF_PACKET socket:
  fragsend.py DEV DST_MAC syn-frag N    N TCP SYNs to 198.18.0.2:8080 from
      198.18.1.x, each as two IPv4 fragments, the first with 8 bytes of TCP
  fragsend.py DEV DST_MAC udp6-dstopts N  N UDP datagrams to
      [2001:db8::2]:9000 behind 9 destination-options headers
"""
import socket
import struct
import sys


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ipv4(src, dst, ident, frag, payload):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident,
                    frag, 64, socket.IPPROTO_TCP, 0,
                    socket.inet_aton(src), socket.inet_aton(dst))
    return h[:10] + struct.pack("!H", csum(h)) + h[12:] + payload


def syn_frags(i):
    src, dst = "198.18.1.%d" % (1 + i % 250), "198.18.0.2"
    sport = 20000 + i
    tcp = struct.pack("!HHIIBBHHH", sport, 8080, 1000 + i, 0, 5 << 4, 0x02,
                      65535, 0, 0)
    pseudo = struct.pack("!4s4sBBH", socket.inet_aton(src),
                         socket.inet_aton(dst), 0, socket.IPPROTO_TCP, 20)
    tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
    ident = 0x4000 + i
    # the first fragment: 8 bytes of TCP (ports, seq), MF; the second at
    # offset 1 (8 bytes) the rest, flags among it
    return [ipv4(src, dst, ident, 0x2000, tcp[:8]),
            ipv4(src, dst, ident, 1, tcp[8:])]


def udp6_dstopts(i):
    src = socket.inet_pton(socket.AF_INET6, "2001:db8::1")
    dst = socket.inet_pton(socket.AF_INET6, "2001:db8::2")
    payload = b"x%04d" % i
    udp = struct.pack("!HHHH", 30000 + i % 1000, 9000, 8 + len(payload), 0)
    pseudo = src + dst + struct.pack("!IxxxB", 8 + len(payload), 17)
    c = csum(pseudo + udp + payload) or 0xFFFF
    udp = udp[:6] + struct.pack("!H", c) + payload
    exts = b""
    for k in range(9):
        nxt = 60 if k < 8 else 17
        # next header, length 0 (8 bytes), PadN of 4
        exts += struct.pack("!BBBB4x", nxt, 0, 1, 4)
    ip6 = struct.pack("!IHBB16s16s", 6 << 28, len(exts) + len(udp), 60, 64,
                      src, dst)
    return [ip6 + exts + udp]


def main():
    dev, mac, kind, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((dev, 0))
    dmac = bytes.fromhex(mac.replace(":", ""))
    smac = s.getsockname()[4]
    build, etype = {"syn-frag": (syn_frags, 0x0800),
                    "udp6-dstopts": (udp6_dstopts, 0x86DD)}[kind]
    eth = dmac + smac + struct.pack("!H", etype)
    for i in range(n):
        for f in build(i):
            s.send(eth + f)


if __name__ == "__main__":
    main()
