#!/usr/bin/env python3
"""Writes the seed corpus of the `deframer` fuzz target (byte layouts as in docs/wire.md)."""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "deframer")


def hello(src=1, dst=2, pg=4, cls=1, auth=b""):
    return b"MMSH" + bytes([1, src, dst, pg, cls, 0]) + struct.pack(">H", len(auth)) + auth


def frame(ftype, cls, payload, seq=None):
    flags, s = (1, seq) if seq is not None else (0, 0)
    return struct.pack(">IBBBBI", len(payload), ftype, cls, flags, 0, s) + payload


def ipv4(n, proto=17):
    p = bytearray(n)
    p[0] = 0x45
    p[2:4] = struct.pack(">H", n)
    p[8] = 64
    p[9] = proto
    p[12:16] = bytes([198, 19, 1, 10])
    p[16:20] = bytes([198, 19, 2, 10])
    return bytes(p)


def ipv6(n):
    p = bytearray(n)
    p[0] = 0x60
    p[4:6] = struct.pack(">H", n - 40)
    p[6] = 59
    return bytes(p)


VIRTIO = bytes([0x01, 0x01, 0x36, 0x00, 0xA8, 0x05, 0x22, 0x00, 0x10, 0x00])

SEEDS = {
    "hello_plain": hello(),
    "hello_auth": hello(15, 3, 15, 2, b"\xaa\xbb\xcc"),
    "hello_then_frames": hello() + frame(1, 1, ipv4(60)) + frame(3, 1, b""),
    "ip_v4": frame(1, 2, ipv4(20)),
    "ip_v6_seq": frame(1, 1, ipv6(48), seq=7),
    "ip_virtio_seq": frame(2, 1, VIRTIO + ipv6(40), seq=0x01020304),
    "keepalive": frame(3, 2, b""),
    "control": frame(4, 1, b"hi"),
    "unknown_type": frame(0x7F, 1, b"\xde\xad\x00"),
    "stream_mixed": frame(1, 2, ipv4(100, 6)) + frame(3, 2, b"") + frame(2, 2, VIRTIO + ipv4(1400))
    + frame(4, 1, b"x" * 40) + frame(1, 1, ipv4(28)),
    "truncated_frame": frame(1, 2, ipv4(100))[:60],
    "oversize_header": struct.pack(">IBBBBI", 65586, 2, 2, 0, 0, 0),
    "bad_ip_length": struct.pack(">IBBBBI", 20, 1, 1, 0, 0, 0) + ipv4(40)[:20],
    "bad_flags": struct.pack(">IBBBBI", 0, 3, 1, 0x80, 0, 0),
    "junk": b"GET / HTTP/1.1\r\n\r\n",
}



def v4_ports(tos, proto, sport, dport, frag=0):
    p = bytearray(ipv4(28, proto))
    p[1] = tos
    p[6:8] = struct.pack(">H", frag)
    p[20:24] = struct.pack(">HH", sport, dport)
    return bytes(p)


def v6_ext(next_hdr, exts, sport, dport):
    body = b""
    for nh, length in exts:
        body += bytes([nh, length // 8 - 1]) + bytes(length - 2)
    body += struct.pack(">HH", sport, dport) + bytes(4)
    p = bytearray(40)
    p[0] = 0x60
    p[1] = 0x20  # traffic class: ECT(0)
    p[4:6] = struct.pack(">H", len(body))
    p[6] = next_hdr
    p[7] = 64
    return bytes(p) + body


CLASSIFIER_SEEDS = {
    "v4_udp_ef_ect": v4_ports(0xBA, 17, 1234, 53),
    "v4_tcp_ssh": v4_ports(0x00, 6, 40000, 22),
    "v4_fragment": v4_ports(0x01, 17, 1, 2, frag=0x2000),
    "v4_icmp": ipv4(28, 1),
    "v6_udp": v6_ext(17, [], 5000, 6000),
    "v6_hbh_dstopt_tcp": v6_ext(0, [(60, 8), (6, 16)], 22, 2222),
    "v6_fragment": v6_ext(44, [(17, 8)], 1, 2),
    "truncated_v4": v4_ports(0, 6, 1, 2)[:22],
    "not_ip": b"\x55" * 40,
}


def write(out, seeds):
    os.makedirs(out, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(seeds)} seeds to {out}")


write(OUT, SEEDS)
write(os.path.join(os.path.dirname(OUT), "classifier"), CLASSIFIER_SEEDS)
