#!/usr/bin/env python3
"""An authenticated peer for tests/netns_security_tls.rs: TLS 1.3 to gw2 with branch 1's real
certificate, the hello (1 -> 2, group 0, Type II), then IP + virtio frames (type 0x02) carrying
UDP datagrams 198.19.1.10 -> 198.19.2.10:7001 whose virtio_net_hdr asks for work that does not fit
the packet, and last one frame with an all-zero header (no offload work) whose payload is
"virtio-ok". Prints "sent N" (N malformed frames) and exits 0 while the connection is still up
afterwards (a malformed header drops the frame, not the connection); 1 if gw2 closed it.

virtio_net_hdr (legacy, little-endian u16s): flags, gso_type, hdr_len, gso_size, csum_start,
csum_offset.
"""
import argparse
import socket
import ssl
import struct
import sys
import time

NEEDS_CSUM, RSC_INFO = 0x01, 0x04
GSO_TCPV4, GSO_UDP, GSO_TCPV6, GSO_UDP_L4 = 1, 3, 4, 5


def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def udp_packet(payload):
    udp = struct.pack("!HHHH", 40000, 7001, 8 + len(payload), 0) + payload
    src, dst = socket.inet_aton("198.19.1.10"), socket.inet_aton("198.19.2.10")
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 7, 0, 64, 17, 0, src, dst)
    hdr = hdr[:10] + struct.pack("!H", checksum(hdr)) + hdr[12:]
    return hdr + udp


def vnet(flags=0, gso_type=0, hdr_len=0, gso_size=0, csum_start=0, csum_offset=0):
    return struct.pack("<BBHHHH", flags, gso_type, hdr_len, gso_size, csum_start, csum_offset)


# (name, header, UDP payload length): each one is malformed for a UDP/IPv4 packet.
BAD = [
    ("TCPv4 GSO on a UDP packet", vnet(NEEDS_CSUM, GSO_TCPV4, 28, 100, 20, 16), 1000),
    ("TCPv6 GSO on an IPv4 packet", vnet(NEEDS_CSUM, GSO_TCPV6, 28, 100, 20, 6), 1000),
    ("legacy UFO", vnet(NEEDS_CSUM, GSO_UDP, 28, 100, 20, 6), 1000),
    ("unknown gso_type 0x07", vnet(NEEDS_CSUM, 0x07, 28, 100, 20, 6), 1000),
    ("USO with gso_size 0", vnet(NEEDS_CSUM, GSO_UDP_L4, 28, 0, 20, 6), 1000),
    ("USO with 1,000 segments", vnet(NEEDS_CSUM, GSO_UDP_L4, 28, 1, 20, 6), 1000),
    ("USO gso_size 0xffff (GSO_BY_FRAGS)", vnet(NEEDS_CSUM, GSO_UDP_L4, 28, 0xFFFF, 20, 6), 1000),
    ("GSO without NEEDS_CSUM", vnet(0, GSO_UDP_L4, 28, 100, 0, 0), 1000),
    ("csum_start past the packet", vnet(NEEDS_CSUM, 0, 0, 0, 4000, 6), 100),
    ("csum field past the packet", vnet(NEEDS_CSUM, 0, 0, 0, 124, 6), 100),
    ("csum_offset not at the UDP checksum", vnet(NEEDS_CSUM, 0, 0, 0, 20, 2), 100),
    ("hdr_len past the packet", vnet(NEEDS_CSUM, GSO_UDP_L4, 9000, 100, 20, 6), 1000),
    ("RSC_INFO flag", vnet(RSC_INFO, 0, 0, 0, 0, 0), 100),
    ("unknown flag bits", vnet(0x80, 0, 0, 0, 0, 0), 100),
]


def frame(payload, ftype=0x02):
    return struct.pack("!IBBBBI", len(payload), ftype, 0x02, 0, 0, 0) + payload


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="198.18.20.2")
    p.add_argument("--port", type=int, default=0x2000)
    p.add_argument("--ca", required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    a = p.parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_verify_locations(a.ca)
    ctx.load_cert_chain(a.cert, a.key)
    raw = socket.create_connection((a.host, a.port), timeout=6)
    s = ctx.wrap_socket(raw, server_hostname="branch-2.mms")
    out = b"MMSH" + bytes([1, 1, 2, 0, 2, 0, 0, 0])
    for i, (name, hdr, n) in enumerate(BAD):
        out += frame(hdr + udp_packet(b"virtio-bad-%02d " % i + bytes(n - 14)))
    out += frame(vnet() + udp_packet(b"virtio-ok"))
    s.sendall(out)
    print("sent", len(BAD), flush=True)
    # Still up 1.5 s later: the frames were dropped one by one, the connection stayed.
    s.settimeout(1.5)
    try:
        b = s.recv(4096)
        if b == b"":
            return 1
    except socket.timeout:
        pass
    except (ssl.SSLError, OSError):
        return 1
    time.sleep(0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
