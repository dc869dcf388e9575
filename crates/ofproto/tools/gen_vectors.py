#!/usr/bin/env python3
"""Generate the OpenFlow 1.3 golden vectors of crates/ofproto from os-ken.

Usage (offline, os-ken from PyPI):
    pip install os-ken
    python3 crates/ofproto/tools/gen_vectors.py > crates/ofproto/tests/vectors/os_ken.txt

Output: one line per message, `<name> <source> <hex>`, read by crates/ofproto/tests/golden.rs.

source = "serialize": built by os-ken itself (`ProtocolDesc` + message class + `serialize()`).
source = "parsed":   os-ken has no serializer for this message (switch-to-controller messages,
                     multipart replies, HELLO elements). The bytes are packed here with os-ken's own
                     pack strings and sub-structure serializers (OFPMatch, OFPInstruction*,
                     OFPAction*, OFPBucket, OFPMeterBand*), then parsed back with os-ken's
                     `ofproto_parser.msg()` and checked field by field, so os-ken vouches for them.
"""
import struct
import sys

from os_ken.lib.pack_utils import msg_pack_into
from os_ken.ofproto import ofproto_parser, ofproto_protocol
from os_ken.ofproto import ofproto_v1_3 as o
from os_ken.ofproto import ofproto_v1_3_parser as p

DP = ofproto_protocol.ProtocolDesc(version=o.OFP_VERSION)
OUT = []


def emit(name, source, buf):
    OUT.append("%s %s %s" % (name, source, bytes(buf).hex()))


def ser(name, msg, xid):
    msg.set_xid(xid)
    msg.serialize()
    emit(name, "serialize", msg.buf)
    # Every serialized vector os-ken can parse (it parses only what a switch sends, plus a few
    # symmetric messages) must parse back.
    if msg.cls_msg_type in p._MSG_PARSERS and p._MSG_PARSERS[msg.cls_msg_type] is not None:
        parse(msg.buf)
    return msg


def parse(buf):
    version, msg_type, msg_len, xid = ofproto_parser.header(bytes(buf))
    assert msg_len == len(buf), (msg_len, len(buf))
    if msg_type == o.OFPT_HELLO:
        # Parse every HELLO with the 1.3 parser, whatever its header version (os-ken's 1.5
        # parser does not advance over element padding).
        return p.OFPHello.parser(DP, version, msg_type, msg_len, xid, bytes(buf))
    return ofproto_parser.msg(DP, version, msg_type, msg_len, xid, bytes(buf))


def packed(name, msg_type, xid, body, check, version=o.OFP_VERSION):
    buf = bytearray()
    msg_pack_into(o.OFP_HEADER_PACK_STR, buf, 0, version, msg_type,
                  o.OFP_HEADER_SIZE + len(body), xid)
    buf += body
    m = parse(buf)
    assert m.xid == xid
    check(m)
    emit(name, "parsed", buf)


def ser_obj(obj):
    """Bytes of an os-ken sub-structure (match, instruction, action, bucket, band)."""
    b = bytearray()
    obj.serialize(b, 0)
    return bytes(b)


def mp_reply(mp_type, flags, body):
    return struct.pack("!HH4x", mp_type, flags) + body


def desc_str(s, n):
    return s.encode().ljust(n, b"\0")


# ---------------------------------------------------------------- the paper's swap flows
# Fig. 4(b), subflow 1 of path group 4 between branch 1 and 2, via branch 3; addresses from the
# MMS testbed plan (p_k^b = 198.18.(10b+k).2).
P11, P12, P13 = "198.18.11.2", "198.18.21.2", "198.18.31.2"


def swap_match(src, dst, tcp_dst=None, tcp_src=None):
    kw = dict(eth_type=0x0800, ip_proto=6, ipv4_src=src, ipv4_dst=dst)
    if tcp_dst is not None:
        kw["tcp_dst"] = tcp_dst
    if tcp_src is not None:
        kw["tcp_src"] = tcp_src
    return p.OFPMatch(**kw)


def swap_actions(src, dst, out_port, tcp_dst=None, tcp_src=None):
    acts = [p.OFPActionSetField(ipv4_src=src), p.OFPActionSetField(ipv4_dst=dst)]
    if tcp_dst is not None:
        acts.append(p.OFPActionSetField(tcp_dst=tcp_dst))
    if tcp_src is not None:
        acts.append(p.OFPActionSetField(tcp_src=tcp_src))
    acts.append(p.OFPActionOutput(out_port, 0))
    return [p.OFPInstructionActions(o.OFPIT_APPLY_ACTIONS, acts)]


def main():
    # HELLO ------------------------------------------------------------------------------
    ser("hello_plain", p.OFPHello(DP), 1)

    def chk_bitmap(vs):
        def c(m):
            assert m.elements[0].versions == vs, m.elements[0].versions
        return c
    packed("hello_bitmap_13", o.OFPT_HELLO, 2,
           struct.pack("!HHI", o.OFPHET_VERSIONBITMAP, 8, 1 << 4), chk_bitmap([4]))
    packed("hello_bitmap_10_13", o.OFPT_HELLO, 3,
           struct.pack("!HHI", o.OFPHET_VERSIONBITMAP, 8, (1 << 4) | (1 << 1)),
           chk_bitmap([1, 4]))
    # A 1.5 switch: header version 6, bitmap {1.0, 1.3, 1.4, 1.5}, three words (length 16, so no
    # padding: os-ken's HELLO parser does not skip element padding; padded elements are covered
    # by the Rust unit tests).
    packed("hello_bitmap_v6_three_words", o.OFPT_HELLO, 4,
           struct.pack("!HHIII", o.OFPHET_VERSIONBITMAP, 16,
                       (1 << 1) | (1 << 4) | (1 << 5) | (1 << 6), 0, 0),
           chk_bitmap([1, 4, 5, 6]), version=6)

    # ERROR ------------------------------------------------------------------------------
    fm_head = bytes.fromhex("040e00500000002a")
    ser("error_hello_failed", p.OFPErrorMsg(DP, type_=o.OFPET_HELLO_FAILED,
        code=o.OFPHFC_INCOMPATIBLE, data=b"no common version"), 5)
    ser("error_bad_request_bad_type", p.OFPErrorMsg(DP, type_=o.OFPET_BAD_REQUEST,
        code=o.OFPBRC_BAD_TYPE, data=bytes.fromhex("04ff000800000007")), 6)
    ser("error_flow_mod_bad_table", p.OFPErrorMsg(DP, type_=o.OFPET_FLOW_MOD_FAILED,
        code=o.OFPFMFC_BAD_TABLE_ID, data=fm_head), 7)
    ser("error_bad_match_prereq", p.OFPErrorMsg(DP, type_=o.OFPET_BAD_MATCH,
        code=o.OFPBMC_BAD_PREREQ, data=fm_head), 8)
    ser("error_bad_action_out_port", p.OFPErrorMsg(DP, type_=o.OFPET_BAD_ACTION,
        code=o.OFPBAC_BAD_OUT_PORT, data=fm_head), 9)
    ser("error_group_mod_loop", p.OFPErrorMsg(DP, type_=o.OFPET_GROUP_MOD_FAILED,
        code=o.OFPGMFC_LOOP, data=b""), 10)
    ser("error_meter_mod_bad_band", p.OFPErrorMsg(DP, type_=o.OFPET_METER_MOD_FAILED,
        code=o.OFPMMFC_BAD_BAND, data=b"\x04"), 11)
    ser("error_experimenter", p.OFPErrorExperimenterMsg(DP, exp_type=0x0102,
        experimenter=0x00002320, data=b"nx"), 12)

    # ECHO / EXPERIMENTER ----------------------------------------------------------------
    ser("echo_request", p.OFPEchoRequest(DP, data=b"keepalive"), 13)
    ser("echo_request_empty", p.OFPEchoRequest(DP, data=b""), 14)
    ser("echo_reply", p.OFPEchoReply(DP, data=b"keepalive"), 13)
    ser("experimenter", p.OFPExperimenter(DP, experimenter=0x00002320, exp_type=0x10,
        data=b"\x00\x01\x02\x03"), 15)

    # FEATURES / CONFIG ------------------------------------------------------------------
    ser("features_request", p.OFPFeaturesRequest(DP), 16)

    def chk_features(m):
        assert (m.datapath_id, m.n_buffers, m.n_tables, m.auxiliary_id, m.capabilities) == \
            (0x0000aabbccddeeff, 256, 254, 0, 0x4f), m
    body = bytearray(24)
    msg_pack_into(o.OFP_SWITCH_FEATURES_PACK_STR, body, 0, 0x0000aabbccddeeff, 256, 254, 0,
                  0x4f, 0)
    packed("features_reply", o.OFPT_FEATURES_REPLY, 16, bytes(body), chk_features)

    ser("get_config_request", p.OFPGetConfigRequest(DP), 17)

    def chk_cfg(m):
        assert (m.flags, m.miss_send_len) == (o.OFPC_FRAG_REASM, 0xffe5)
    packed("get_config_reply", o.OFPT_GET_CONFIG_REPLY, 17,
           struct.pack("!HH", o.OFPC_FRAG_REASM, 0xffe5), chk_cfg)
    ser("set_config", p.OFPSetConfig(DP, o.OFPC_FRAG_NORMAL, 128), 18)

    # PACKET_IN / FLOW_REMOVED / PORT_STATUS --------------------------------------------
    frame = bytes.fromhex("ffffffffffff02000000000108060001080006040001"
                          "020000000001c6120b02000000000000c6120b01")

    def chk_pin(reason, fields):
        def c(m):
            assert m.reason == reason and m.data == frame, m
            assert dict(m.match._fields2) == fields, m.match._fields2
        return c
    m = p.OFPMatch(in_port=1)
    body = struct.pack("!IHBBQ", o.OFP_NO_BUFFER, len(frame), o.OFPR_NO_MATCH, 0, 0) + \
        ser_obj(m) + b"\0\0" + frame
    packed("packet_in_no_match", o.OFPT_PACKET_IN, 0, body, chk_pin(0, {"in_port": 1}))
    m = p.OFPMatch(in_port=2, eth_type=0x0806, metadata=(0x1122, 0xffff),
                   tunnel_id=7)
    body = struct.pack("!IHBBQ", 0x100, len(frame), o.OFPR_ACTION, 3, 0xb0140000) + \
        ser_obj(m) + b"\0\0" + frame
    packed("packet_in_action", o.OFPT_PACKET_IN, 0, body,
           chk_pin(1, {"in_port": 2, "eth_type": 0x0806, "metadata": (0x1122, 0xffff),
                       "tunnel_id": 7}))

    def chk_fr(m):
        assert (m.cookie, m.priority, m.reason, m.packet_count, m.byte_count) == \
            (0xb214000000000001, 100, o.OFPRR_DELETE, 42, 4200), m
    body = struct.pack("!QHBBIIHHQQ", 0xb214000000000001, 100, o.OFPRR_DELETE, 0, 12,
                       500000000, 30, 0, 42, 4200) + \
        ser_obj(swap_match(P11, P13, tcp_dst=0x2114))
    packed("flow_removed", o.OFPT_FLOW_REMOVED, 0, body, chk_fr)

    def port_bytes(no, mac, name, speed):
        b = bytearray(o.OFP_PORT_SIZE)
        msg_pack_into(o.OFP_PORT_PACK_STR, b, 0, no, bytes.fromhex(mac.replace(":", "")),
                      name.encode(), 0, o.OFPPS_LIVE, o.OFPPF_10GB_FD | o.OFPPF_COPPER,
                      0, 0, 0, speed, speed)
        return bytes(b)

    def chk_ps(m):
        assert m.reason == o.OFPPR_MODIFY and m.desc.name == b"wan0" and m.desc.port_no == 1
    packed("port_status", o.OFPT_PORT_STATUS, 0,
           struct.pack("!B7x", o.OFPPR_MODIFY) + port_bytes(1, "02:00:00:00:0b:02", "wan0",
                                                             10000000), chk_ps)

    # PACKET_OUT -------------------------------------------------------------------------
    ser("packet_out", p.OFPPacketOut(DP, buffer_id=o.OFP_NO_BUFFER, in_port=o.OFPP_CONTROLLER,
        actions=[p.OFPActionOutput(3, 0)], data=frame), 19)
    ser("packet_out_buffered", p.OFPPacketOut(DP, buffer_id=0x42, in_port=1,
        actions=[p.OFPActionOutput(o.OFPP_TABLE, 0), p.OFPActionOutput(o.OFPP_CONTROLLER,
                                                                      o.OFPCML_NO_BUFFER)]), 20)

    # FLOW_MOD: the paper's Fig. 4(b) swap flows -----------------------------------------
    def fm(name, xid, **kw):
        ser(name, p.OFPFlowMod(DP, **kw), xid)
    fm("flow_mod_swap_source", 21, cookie=0xb2140000000000a1, priority=1000,
       match=swap_match(P11, P12, tcp_dst=0x2004),
       instructions=swap_actions(P11, P13, 1, tcp_dst=0x2114))
    fm("flow_mod_swap_transit", 22, cookie=0xb2140000000000a2, priority=1000,
       match=swap_match(P11, P13, tcp_dst=0x2114),
       instructions=swap_actions(P13, P12, o.OFPP_IN_PORT, tcp_dst=0x2114))
    fm("flow_mod_swap_destination", 23, cookie=0xb2140000000000a3, priority=1000,
       match=swap_match(P13, P12, tcp_dst=0x2114),
       instructions=swap_actions(P11, P12, 3, tcp_dst=0x2004))
    fm("flow_mod_swap_reverse", 24, cookie=0xb2140000000000b1, priority=1000,
       match=swap_match(P12, P11, tcp_src=0x2004),
       instructions=swap_actions(P12, P13, 1, tcp_src=0x2114))
    fm("flow_mod_delete_cookie", 25, cookie=0xb214000000000000, cookie_mask=0xffff000000000000,
       table_id=o.OFPTT_ALL, command=o.OFPFC_DELETE, out_port=o.OFPP_ANY,
       out_group=o.OFPG_ANY, match=p.OFPMatch())
    fm("flow_mod_table_miss", 26, priority=0, flags=o.OFPFF_SEND_FLOW_REM,
       idle_timeout=60, hard_timeout=600, match=p.OFPMatch(),
       instructions=[p.OFPInstructionActions(o.OFPIT_APPLY_ACTIONS,
                     [p.OFPActionOutput(o.OFPP_CONTROLLER, o.OFPCML_NO_BUFFER)])])
    fm("flow_mod_all_instructions", 27, table_id=1, command=o.OFPFC_MODIFY_STRICT,
       priority=7, match=p.OFPMatch(in_port=1),
       instructions=[p.OFPInstructionMeter(5),
                     p.OFPInstructionActions(o.OFPIT_APPLY_ACTIONS, [p.OFPActionDecNwTtl()]),
                     p.OFPInstructionActions(o.OFPIT_CLEAR_ACTIONS, []),
                     p.OFPInstructionActions(o.OFPIT_WRITE_ACTIONS,
                                             [p.OFPActionOutput(2, 0)]),
                     p.OFPInstructionWriteMetadata(0xdead, 0xffff),
                     p.OFPInstructionGotoTable(2)])
    fm("flow_mod_all_actions", 28, match=p.OFPMatch(in_port=1), instructions=[
        p.OFPInstructionActions(o.OFPIT_APPLY_ACTIONS, [
            p.OFPActionCopyTtlOut(), p.OFPActionCopyTtlIn(), p.OFPActionSetMplsTtl(9),
            p.OFPActionDecMplsTtl(), p.OFPActionPushVlan(0x8100), p.OFPActionPopVlan(),
            p.OFPActionPushMpls(0x8847), p.OFPActionPopMpls(0x0800), p.OFPActionSetQueue(3),
            p.OFPActionGroup(4), p.OFPActionSetNwTtl(64), p.OFPActionDecNwTtl(),
            p.OFPActionPushPbb(0x88e7), p.OFPActionPopPbb(),
            p.OFPActionSetField(eth_dst="02:00:00:00:00:01"),
            p.OFPActionSetField(vlan_vid=0x1005), p.OFPActionSetField(ip_dscp=46),
            p.OFPActionExperimenterUnknown(0x00abcdef, data=b"\x00\x0a\x00\x00\x00\x00\x00\x00"),
            p.OFPActionOutput(o.OFPP_NORMAL, 0)])])
    # Every OpenFlow-basic field at least once, masked where the spec allows.
    fm("flow_mod_match_l2_masked", 29, match=p.OFPMatch(
        in_port=1, in_phy_port=1, metadata=(0x0102030400000000, 0xffffffff00000000),
        eth_dst=("02:00:00:00:00:00", "ff:ff:ff:00:00:00"),
        eth_src=("02:00:00:00:00:07", "ff:ff:ff:ff:ff:ff"),
        eth_type=0x0800, vlan_vid=(0x1000, 0x1000), vlan_pcp=3, ip_dscp=10, ip_ecn=1,
        ip_proto=17, ipv4_src=("198.18.0.0", "255.254.0.0"), ipv4_dst="198.19.2.9",
        udp_src=4789, udp_dst=53, tunnel_id=(0x55, 0xff)))
    fm("flow_mod_match_tcp_icmp_sctp", 30, match=p.OFPMatch(
        eth_type=0x0800, ip_proto=132, sctp_src=1, sctp_dst=2))
    fm("flow_mod_match_icmpv4", 31, match=p.OFPMatch(
        eth_type=0x0800, ip_proto=1, icmpv4_type=8, icmpv4_code=0))
    fm("flow_mod_match_arp", 32, match=p.OFPMatch(
        eth_type=0x0806, arp_op=1, arp_spa=("198.18.11.0", "255.255.255.0"),
        arp_tpa="198.18.11.1", arp_sha=("02:00:00:00:00:00", "ff:ff:ff:ff:ff:00"),
        arp_tha="00:00:00:00:00:00"))
    fm("flow_mod_match_ipv6", 33, match=p.OFPMatch(
        eth_type=0x86dd, ipv6_src=("2001:db8::", "ffff:ffff::"), ipv6_dst="2001:db8::1",
        ipv6_flabel=(0x12345, 0xfffff), ip_proto=58, icmpv6_type=135, icmpv6_code=0,
        ipv6_nd_target="2001:db8::2", ipv6_nd_sll="02:00:00:00:00:02",
        ipv6_exthdr=(0x0100, 0x01ff)))
    fm("flow_mod_match_nd_tll", 34, match=p.OFPMatch(
        eth_type=0x86dd, ip_proto=58, icmpv6_type=136, ipv6_nd_tll="02:00:00:00:00:03"))
    fm("flow_mod_match_mpls", 35, match=p.OFPMatch(
        eth_type=0x8847, mpls_label=0x12345, mpls_tc=5, mpls_bos=1))
    fm("flow_mod_match_pbb", 36, match=p.OFPMatch(
        eth_type=0x88e7, pbb_isid=(0xabcd00, 0xffff00)))
    fm("flow_mod_match_tcp", 37, match=p.OFPMatch(
        eth_type=0x86dd, ip_proto=6, tcp_src=0xb014, tcp_dst=443))

    # GROUP_MOD / PORT_MOD / TABLE_MOD / METER_MOD ---------------------------------------
    ser("group_mod_select_weights", p.OFPGroupMod(DP, command=o.OFPGC_ADD,
        type_=o.OFPGT_SELECT, group_id=1, buckets=[
            p.OFPBucket(weight=3, actions=[p.OFPActionOutput(1, 0)]),
            p.OFPBucket(weight=1, actions=[p.OFPActionSetField(ipv4_src=P11),
                                           p.OFPActionOutput(2, 0)])]), 40)
    ser("group_mod_fast_failover", p.OFPGroupMod(DP, command=o.OFPGC_MODIFY,
        type_=o.OFPGT_FF, group_id=2, buckets=[
            p.OFPBucket(watch_port=1, actions=[p.OFPActionOutput(1, 0)]),
            p.OFPBucket(watch_port=2, actions=[p.OFPActionOutput(2, 0)])]), 41)
    ser("group_mod_delete", p.OFPGroupMod(DP, command=o.OFPGC_DELETE, type_=o.OFPGT_ALL,
        group_id=o.OFPG_ALL, buckets=[]), 42)
    ser("port_mod", p.OFPPortMod(DP, port_no=2, hw_addr="02:00:00:00:0b:02",
        config=o.OFPPC_NO_PACKET_IN, mask=o.OFPPC_NO_PACKET_IN | o.OFPPC_PORT_DOWN,
        advertise=o.OFPPF_1GB_FD), 43)
    ser("table_mod", p.OFPTableMod(DP, 1, 3), 44)
    ser("meter_mod_drop", p.OFPMeterMod(DP, command=o.OFPMC_ADD,
        flags=o.OFPMF_KBPS | o.OFPMF_BURST, meter_id=1,
        bands=[p.OFPMeterBandDrop(rate=40000, burst_size=1000)]), 45)
    ser("meter_mod_remark_experimenter", p.OFPMeterMod(DP, command=o.OFPMC_MODIFY,
        flags=o.OFPMF_PKTPS, meter_id=2, bands=[
            p.OFPMeterBandDscpRemark(rate=100, burst_size=10, prec_level=1),
            p.OFPMeterBandExperimenter(rate=5, burst_size=6, experimenter=0x2320)]), 46)

    # MULTIPART requests -----------------------------------------------------------------
    ser("mp_desc_request", p.OFPDescStatsRequest(DP, 0), 50)
    ser("mp_flow_request", p.OFPFlowStatsRequest(DP, 0, 0, o.OFPP_ANY, o.OFPG_ANY,
        0xb214000000000000, 0xffff000000000000, swap_match(P11, P12, tcp_dst=0x2004)), 51)
    ser("mp_flow_request_all", p.OFPFlowStatsRequest(DP), 52)
    ser("mp_aggregate_request", p.OFPAggregateStatsRequest(DP, 0, o.OFPTT_ALL, o.OFPP_ANY,
        o.OFPG_ANY, 0, 0, p.OFPMatch(eth_type=0x0800)), 53)
    ser("mp_table_request", p.OFPTableStatsRequest(DP, 0), 54)
    ser("mp_port_stats_request", p.OFPPortStatsRequest(DP, 0, o.OFPP_ANY), 55)
    ser("mp_queue_request", p.OFPQueueStatsRequest(DP, 0, 1, o.OFPQ_ALL), 56)
    ser("mp_group_request", p.OFPGroupStatsRequest(DP, 0, o.OFPG_ALL), 57)
    ser("mp_group_desc_request", p.OFPGroupDescStatsRequest(DP, 0), 58)
    ser("mp_group_features_request", p.OFPGroupFeaturesStatsRequest(DP, 0), 59)
    ser("mp_meter_request", p.OFPMeterStatsRequest(DP, 0, o.OFPM_ALL), 60)
    ser("mp_meter_config_request", p.OFPMeterConfigStatsRequest(DP, 0, 1), 61)
    ser("mp_meter_features_request", p.OFPMeterFeaturesStatsRequest(DP, 0), 62)
    ser("mp_table_features_request", p.OFPTableFeaturesStatsRequest(DP, 0, []), 63)
    ser("mp_port_desc_request", p.OFPPortDescStatsRequest(DP, 0), 64)
    ser("mp_experimenter_request", p.OFPExperimenterStatsRequest(DP, 0, 0x2320, 7,
        b"\x01\x02\x03\x04"), 65)

    # MULTIPART replies ------------------------------------------------------------------
    def chk_body(fn):
        def c(m):
            fn(m.body)
        return c

    body = desc_str("Nicira, Inc.", 256) + desc_str("Open vSwitch", 256) + \
        desc_str("3.1.0", 256) + desc_str("None", 32) + desc_str("br0", 256)
    packed("mp_desc_reply", o.OFPT_MULTIPART_REPLY, 50, mp_reply(o.OFPMP_DESC, 0, body),
           chk_body(lambda b: b.sw_desc == b"3.1.0" or (_ for _ in ()).throw(AssertionError)))

    def flow_stats(table, prio, cookie, pkts, byts, match, insts):
        mi = ser_obj(match) + b"".join(ser_obj(i) for i in insts)
        return struct.pack("!HBxIIHHHH4xQQQ", 48 + len(mi), table, 7, 250000000, prio, 0, 0,
                           0, cookie, pkts, byts) + mi
    fs1 = flow_stats(0, 1000, 0xb2140000000000a1, 10, 1500,
                     swap_match(P11, P12, tcp_dst=0x2004),
                     swap_actions(P11, P13, 1, tcp_dst=0x2114))
    fs2 = flow_stats(0, 0, 0, 3, 180, p.OFPMatch(), [])

    def chk_flows(n):
        def c(b):
            assert len(b) == n, b
            assert b[0].cookie == 0xb2140000000000a1 and b[0].packet_count == 10
            assert b[0].match["tcp_dst"] == 0x2004
        return c
    packed("mp_flow_reply", o.OFPT_MULTIPART_REPLY, 51, mp_reply(o.OFPMP_FLOW, 0, fs1 + fs2),
           chk_body(chk_flows(2)))
    packed("mp_flow_reply_more", o.OFPT_MULTIPART_REPLY, 51,
           mp_reply(o.OFPMP_FLOW, o.OFPMPF_REPLY_MORE, fs1), chk_body(chk_flows(1)))
    packed("mp_flow_reply_empty", o.OFPT_MULTIPART_REPLY, 52, mp_reply(o.OFPMP_FLOW, 0, b""),
           chk_body(lambda b: len(b) == 0 or (_ for _ in ()).throw(AssertionError)))

    def chk_agg(b):
        assert (b.packet_count, b.byte_count, b.flow_count) == (13, 1680, 2), b
    packed("mp_aggregate_reply", o.OFPT_MULTIPART_REPLY, 53,
           mp_reply(o.OFPMP_AGGREGATE, 0, struct.pack("!QQI4x", 13, 1680, 2)),
           chk_body(chk_agg))

    def chk_tables(b):
        assert [(t.table_id, t.active_count) for t in b] == [(0, 5), (1, 0)], b
    packed("mp_table_reply", o.OFPT_MULTIPART_REPLY, 54, mp_reply(o.OFPMP_TABLE, 0,
           struct.pack("!B3xIQQ", 0, 5, 1000, 900) + struct.pack("!B3xIQQ", 1, 0, 0, 0)),
           chk_body(chk_tables))

    def port_stats(no, k):
        return struct.pack("!I4x12QII", no, *[k * (i + 1) for i in range(12)], 100, 7)

    def chk_ports(b):
        assert [(s.port_no, s.rx_packets, s.tx_bytes) for s in b] == \
            [(1, 1, 4), (o.OFPP_LOCAL, 1000, 4000)], b
    packed("mp_port_stats_reply", o.OFPT_MULTIPART_REPLY, 55, mp_reply(o.OFPMP_PORT_STATS, 0,
           port_stats(1, 1) + port_stats(o.OFPP_LOCAL, 1000)), chk_body(chk_ports))

    def chk_queue(b):
        assert (b[0].port_no, b[0].queue_id, b[0].tx_packets) == (1, 0, 20), b
    packed("mp_queue_reply", o.OFPT_MULTIPART_REPLY, 56, mp_reply(o.OFPMP_QUEUE, 0,
           struct.pack("!IIQQQII", 1, 0, 3000, 20, 0, 60, 0)), chk_body(chk_queue))

    def chk_groups(b):
        assert b[0].group_id == 1 and len(b[0].bucket_stats) == 2, b
        assert b[0].bucket_stats[1].byte_count == 400
    packed("mp_group_reply", o.OFPT_MULTIPART_REPLY, 57, mp_reply(o.OFPMP_GROUP, 0,
           struct.pack("!H2xII4xQQII", 72, 1, 2, 9, 900, 30, 5) +
           struct.pack("!QQ", 5, 500) + struct.pack("!QQ", 4, 400)), chk_body(chk_groups))

    b1 = ser_obj(p.OFPBucket(weight=3, actions=[p.OFPActionOutput(1, 0)]))
    b2 = ser_obj(p.OFPBucket(weight=1, actions=[p.OFPActionOutput(2, 0)]))

    def chk_gdesc(b):
        assert b[0].type == o.OFPGT_SELECT and [x.weight for x in b[0].buckets] == [3, 1], b
    packed("mp_group_desc_reply", o.OFPT_MULTIPART_REPLY, 58, mp_reply(o.OFPMP_GROUP_DESC, 0,
           struct.pack("!HBxI", 8 + len(b1) + len(b2), o.OFPGT_SELECT, 1) + b1 + b2),
           chk_body(chk_gdesc))

    def chk_gfeat(b):
        assert b.types == 0xf and b.max_groups == [10, 20, 30, 40], b
    packed("mp_group_features_reply", o.OFPT_MULTIPART_REPLY, 59,
           mp_reply(o.OFPMP_GROUP_FEATURES, 0, struct.pack("!II4I4I", 0xf, 0x7, 10, 20, 30,
                                                           40, 1, 2, 3, 4)),
           chk_body(chk_gfeat))

    def chk_meter(b):
        assert b[0].meter_id == 1 and b[0].band_stats[0].byte_band_count == 77, b
    packed("mp_meter_reply", o.OFPT_MULTIPART_REPLY, 60, mp_reply(o.OFPMP_METER, 0,
           struct.pack("!IH6xIQQII", 1, 56, 2, 100, 10000, 9, 8) + struct.pack("!QQ", 7, 77)),
           chk_body(chk_meter))

    band = ser_obj(p.OFPMeterBandDrop(rate=40000, burst_size=1000))

    def chk_mconf(b):
        assert b[0].meter_id == 1 and b[0].bands[0].rate == 40000, b
    packed("mp_meter_config_reply", o.OFPT_MULTIPART_REPLY, 61,
           mp_reply(o.OFPMP_METER_CONFIG, 0, struct.pack("!HHI", 8 + len(band),
                                                         o.OFPMF_KBPS, 1) + band),
           chk_body(chk_mconf))

    def chk_mfeat(b):
        assert (b[0].max_meter, b[0].max_bands, b[0].max_color) == (4096, 1, 0), b
    packed("mp_meter_features_reply", o.OFPT_MULTIPART_REPLY, 62,
           mp_reply(o.OFPMP_METER_FEATURES, 0, struct.pack("!IIIBB2x", 4096, 0x2, 0xf, 1, 0)),
           chk_body(chk_mfeat))

    def chk_pdesc(b):
        assert [x.name for x in b] == [b"wan0", b"br0"], b
    packed("mp_port_desc_reply", o.OFPT_MULTIPART_REPLY, 64, mp_reply(o.OFPMP_PORT_DESC, 0,
           port_bytes(1, "02:00:00:00:0b:02", "wan0", 10000000) +
           port_bytes(o.OFPP_LOCAL, "02:00:00:00:00:ff", "br0", 0)), chk_body(chk_pdesc))

    def chk_exp(m):
        assert (m.body.experimenter, m.body.exp_type, m.body.data) == (0x2320, 7, b"\x09")
    packed("mp_experimenter_reply", o.OFPT_MULTIPART_REPLY, 65,
           mp_reply(o.OFPMP_EXPERIMENTER, 0, struct.pack("!II", 0x2320, 7) + b"\x09"), chk_exp)

    # BARRIER / ROLE / ASYNC / QUEUE_GET_CONFIG -----------------------------------------
    ser("barrier_request", p.OFPBarrierRequest(DP), 70)
    packed("barrier_reply", o.OFPT_BARRIER_REPLY, 70, b"", lambda m: None)
    ser("role_request", p.OFPRoleRequest(DP, o.OFPCR_ROLE_MASTER, 0x0102030405060708), 71)

    def chk_role(m):
        assert (m.role, m.generation_id) == (o.OFPCR_ROLE_MASTER, 0x0102030405060708)
    packed("role_reply", o.OFPT_ROLE_REPLY, 71,
           struct.pack("!I4xQ", o.OFPCR_ROLE_MASTER, 0x0102030405060708), chk_role)
    ser("get_async_request", p.OFPGetAsyncRequest(DP), 72)

    def chk_async(m):
        assert m.packet_in_mask == [3, 1] and m.flow_removed_mask == [15, 0], m
    packed("get_async_reply", o.OFPT_GET_ASYNC_REPLY, 72,
           struct.pack("!6I", 3, 1, 7, 7, 15, 0), chk_async)
    ser("set_async", p.OFPSetAsync(DP, [3, 1], [7, 7], [15, 0]), 73)
    ser("queue_get_config_request", p.OFPQueueGetConfigRequest(DP, 1), 74)

    for line in OUT:
        print(line)
    print("# %d vectors" % len(OUT), file=sys.stderr)


if __name__ == "__main__":
    main()
