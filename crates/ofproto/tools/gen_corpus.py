#!/usr/bin/env python3
"""Regenerate the cargo-fuzz seed corpora from the golden vectors (no os-ken needed).

    python3 crates/ofproto/tools/gen_corpus.py

fuzz/corpus/decode_message/: every golden vector (tests/vectors/os_ken.txt) plus malformed
variants (x_*.bin). fuzz/corpus/channel_input/: byte streams for a connected channel; the first
byte picks the chunk size the stream is fed in (see fuzz/fuzz_targets/checks.rs).
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
CRATE = os.path.dirname(HERE)
BASE = os.path.join(CRATE, "fuzz", "corpus")


def main():
    os.makedirs(os.path.join(BASE, "decode_message"), exist_ok=True)
    os.makedirs(os.path.join(BASE, "channel_input"), exist_ok=True)
    vecs = {}
    with open(os.path.join(CRATE, "tests", "vectors", "os_ken.txt")) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            name, _src, hx = line.split()
            vecs[name] = bytes.fromhex(hx)
    for name, b in vecs.items():
        with open(os.path.join(BASE, "decode_message", name + ".bin"), "wb") as f:
            f.write(b)
    fm = vecs["flow_mod_swap_source"]
    seeds = {
        "trunc_header": fm[:5],
        "trunc_body": fm[:40],
        "len_below_header": bytes.fromhex("0400000400000001"),
        "len_beyond_buffer": bytes.fromhex("040e0100000000010000"),
        "bad_version_flow_mod": bytes([5]) + fm[1:],
        "match_type_standard": fm[:48] + b"\x00\x00" + fm[50:],
        "unknown_type": bytes.fromhex("04630010000000070102030405060708"),
    }
    for k, v in seeds.items():
        with open(os.path.join(BASE, "decode_message", "x_" + k + ".bin"), "wb") as f:
            f.write(v)
    d = vecs
    streams = {
        "echo_barrier_flowstats": b"\x07" + d["echo_request"] + d["barrier_reply"]
        + d["mp_flow_reply_more"] + d["mp_flow_reply"],
        "errors_and_unknown": b"\x00" + d["error_flow_mod_bad_table"] + seeds["unknown_type"]
        + seeds["bad_version_flow_mod"],
        "packet_in_port_status": b"\x20" + d["packet_in_action"] + d["port_status"]
        + d["flow_removed"],
        "framing_error": b"\x03" + d["echo_request"] + seeds["len_below_header"],
    }
    for k, v in streams.items():
        with open(os.path.join(BASE, "channel_input", k + ".bin"), "wb") as f:
            f.write(v)


if __name__ == "__main__":
    main()
