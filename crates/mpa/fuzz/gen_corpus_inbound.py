#!/usr/bin/env python3
"""Writes the seed corpus of the `inbound` fuzz target: byte 0 = where the stream is split into
two reads (0..255 scaled to its length), then what a peer sends on an accepted connection to
branch 2 (docs/wire.md): a hello from branch 1 (LAN 198.19.1.0/24, fd00:1::/64), then frames."""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "inbound")


def hello(src=1, dst=2, pg=0, cls=2):
    return b"MMSH" + bytes([1, src, dst, pg, cls, 0]) + struct.pack(">H", 0)


def frame(ftype, payload, cls=2, seq=None):
    flags, s = (1, seq) if seq is not None else (0, 0)
    return struct.pack(">IBBBBI", len(payload), ftype, cls, flags, 0, s) + payload


def ipv4(src, proto=17, payload=8, tcp_doff=5):
    l4 = tcp_doff * 4 if proto == 6 else 8
    n = 20 + l4 + payload
    p = bytearray(n)
    p[0] = 0x45
    p[2:4] = struct.pack(">H", n)
    p[8] = 64
    p[9] = proto
    p[12:16] = bytes(src)
    p[16:20] = bytes([198, 19, 2, 10])
    if proto == 6:
        p[32] = tcp_doff << 4
    return bytes(p)


def ipv6(src_last):
    p = bytearray(48)
    p[0] = 0x60
    p[4:6] = struct.pack(">H", 8)
    p[6] = 17
    p[8:24] = bytes([0xFD, 0, 0, 1] + [0] * 11 + [src_last])
    return bytes(p)


def vnet(flags, gso, hdr_len, gso_size, start, off):
    return struct.pack("<BBHHHH", flags, gso, hdr_len, gso_size, start, off)


LEGIT = ipv4([198, 19, 1, 10])
TSO = vnet(1, 1, 52, 1448, 20, 16) + ipv4([198, 19, 1, 10], 6, 4000)
SEEDS = {
    "legit_ip": bytes([128]) + hello() + frame(1, LEGIT),
    "spoofed_branch3": bytes([40]) + hello() + frame(1, ipv4([198, 19, 3, 10])),
    "spoofed_own_lan": bytes([200]) + hello() + frame(1, ipv4([198, 19, 2, 5])),
    "virtio_tso_ok": bytes([90]) + hello() + frame(2, TSO),
    "virtio_bad_gso": bytes([90]) + hello() + frame(2, vnet(1, 4, 0, 0, 20, 16) + LEGIT),
    "virtio_csum_outside": bytes([10]) + hello() + frame(2, vnet(1, 0, 0, 0, 2000, 6) + LEGIT),
    "ipv6_allowed": bytes([70]) + hello() + frame(1, ipv6(5)),
    "striped_mixed": bytes([150]) + hello() + frame(1, LEGIT, seq=1)
    + frame(1, ipv4([198, 19, 3, 1]), seq=2) + frame(3, b""),
    "hello_branch3": bytes([0]) + hello(src=3) + frame(1, ipv4([198, 19, 3, 10])),
    "bad_hello": bytes([5]) + b"MMSX" + bytes(8) + frame(1, LEGIT),
    "frame_no_hello": bytes([255]) + frame(1, LEGIT),
}

os.makedirs(OUT, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print(f"wrote {len(SEEDS)} seeds to {OUT}")
