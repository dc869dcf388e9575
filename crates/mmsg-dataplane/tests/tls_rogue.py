#!/usr/bin/env python3
"""The rogue of tests/netns_tls.rs: one attempt at an MPA port, then exit 0 when the gateway
closed (or refused) the connection, 1 if it kept it open.

Every attempt that gets a TLS session (or none) sends a hello for (src, 2, group 0, type II)
followed by one IP frame carrying an ICMP echo 198.19.1.10 -> 198.19.2.10: if the gateway ever
accepted the stream, that packet would reach its TUN (the test checks it does not).

Modes:
  junk                        bytes that are neither TLS nor a hello
  plain                       a valid hello and frame, no TLS
  tls --cert C --key K        TLS 1.3 with the given client certificate (revoked, other branch,
                              foreign CA); --record FILE saves every byte this client sent
  replay --replay FILE        the recorded client byte stream, verbatim, on a new connection
"""
import argparse
import socket
import ssl
import struct
import sys


def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def icmp_packet():
    icmp = struct.pack("!BBHHH", 8, 0, 0, 0x4242, 1) + b"rogue" * 8
    icmp = icmp[:2] + struct.pack("!H", checksum(icmp)) + icmp[4:]
    src = socket.inet_aton("198.19.1.10")
    dst = socket.inet_aton("198.19.2.10")
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), 1, 0, 64, 1, 0, src, dst)
    hdr = hdr[:10] + struct.pack("!H", checksum(hdr)) + hdr[12:]
    return hdr + icmp


def hello_and_frame(src):
    hello = b"MMSH" + bytes([1, src, 2, 0, 2, 0, 0, 0])
    pkt = icmp_packet()
    frame = struct.pack("!IBBBBI", len(pkt), 0x01, 0x02, 0, 0, 0) + pkt
    return hello + frame


def closed_by_peer(sock):
    """True when the peer closes (EOF or reset) within the timeout."""
    sock.settimeout(6)
    try:
        while True:
            b = sock.recv(65536)
            if not b:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def tls_attempt(a):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_verify_locations(a.ca)
    ctx.check_hostname = True
    if a.cert:
        ctx.load_cert_chain(a.cert, a.key)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="branch-2.mms")
    sock = socket.create_connection((a.host, a.port), timeout=6)
    sent = bytearray()

    def pump_out():
        data = out.read()
        if data:
            sent.extend(data)
            sock.sendall(data)

    def pump_in():
        data = sock.recv(65536)
        if not data:
            raise ConnectionResetError("eof")
        inc.write(data)

    try:
        while True:
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                pump_out()
                pump_in()
        pump_out()
        obj.write(hello_and_frame(a.src))
        pump_out()
        if a.record:
            # A legitimate connection to capture: give the gateway a moment to take it, then
            # save what went over the wire from our side.
            sock.settimeout(1)
            try:
                pump_in()
            except (socket.timeout, ssl.SSLError):
                pass
            open(a.record, "wb").write(bytes(sent))
            return 0
        # Refused: the server's alert or EOF arrives (TLS 1.3 client auth fails after the
        # client's Finished); reading through the TLS object surfaces it.
        sock.settimeout(6)
        while True:
            try:
                if obj.read(65536) == b"":
                    return 0
            except ssl.SSLWantReadError:
                pump_in()
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return 0
    except socket.timeout:
        return 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["junk", "plain", "tls", "replay"])
    p.add_argument("--host", default="198.18.20.2")
    p.add_argument("--port", type=int, default=0x2000)
    p.add_argument("--src", type=int, default=1)
    p.add_argument("--ca")
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--record")
    p.add_argument("--replay")
    a = p.parse_args()
    if a.mode == "tls":
        return tls_attempt(a)
    sock = socket.create_connection((a.host, a.port), timeout=6)
    if a.mode == "junk":
        payload = b"GET / HTTP/1.0\r\n\r\n" + bytes(range(256)) * 4
    elif a.mode == "plain":
        payload = hello_and_frame(a.src)
    else:
        payload = open(a.replay, "rb").read()
    try:
        sock.sendall(payload)
    except (ConnectionResetError, BrokenPipeError):
        return 0
    return 0 if closed_by_peer(sock) else 1


if __name__ == "__main__":
    sys.exit(main())
