#!/usr/bin/env python3
"""Generate the packet fixtures of the `wire` crate's tests (testdata/pcap/).

Every fixture is a classic pcap plus a JSON sidecar holding what scapy knows about each packet:
the layers scapy dissects (class name, byte offset in the frame, field values after dissection,
so lengths and checksums are the ones scapy computed) and, for deliberately broken packets, the
layer at which a parser must stop and the error it must report. The Rust tests read both without
scapy. Timestamps are fixed (packet k at k microseconds) so regeneration is byte-identical.

The seed files (plain, vxlan_l3vpn, mplsogre, geneve and the _csum0 variants) are built exactly as
in the OVS-DPDK anchor's gen_pcaps.py.

Needs scapy 2.8.0:  pip install scapy==2.8.0
Usage: scripts/gen-fixtures.py [OUTDIR]   (default: testdata/pcap next to this script's parent)
"""
import json
import os
import sys

try:
    import scapy
    from scapy.all import (
        ARP, GRE, ICMP, IP, SCTP, TCP, UDP, Dot1AD, Dot1Q, Ether, IPOption_NOP, IPOption_RR,
        IPOption_Router_Alert, IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop,
        IPv6ExtHdrRouting, ICMPv6EchoReply, ICMPv6EchoRequest, ICMPv6ND_NA, ICMPv6ND_NS,
        ICMPv6NDOptDstLLAddr, ICMPv6NDOptSrcLLAddr, Packet, PadN, Raw, RawPcapWriter,
        RouterAlert, SCTPChunkData, SCTPChunkInit, SCTPChunkSACK, SCTPChunkCookieAck, conf,
        fragment, fragment6, raw,
    )
    from scapy.contrib.geneve import GENEVE, GeneveOptions
    from scapy.contrib.mpls import MPLS
    from scapy.layers.vxlan import VXLAN
except ImportError:
    sys.exit("scapy is missing: pip install scapy==2.8.0")

if scapy.VERSION != "2.8.0":
    print("warning: fixtures were generated with scapy 2.8.0, this is %s" % scapy.VERSION,
          file=sys.stderr)

conf.verb = 0

M1, M2 = "8c:dc:d4:ab:58:48", "8c:dc:d4:ab:5b:f0"
H1, H2 = "52:54:00:12:34:01", "52:54:00:12:34:02"
V6A, V6B = "2001:db8::1", "2001:db8::2"


# --- seeds, verbatim from reference/ovs-dpdk-anchor/gen_pcaps.py --------------------------------

def pad(p, size):
    n = size - 4 - len(p)  # minus FCS
    return p / Raw(b"\x00" * n) if n > 0 else p


def flows(n):
    for i in range(n):
        yield 1024 + (i % 60000), 2000 + (i // 60000), i


def plain(n, size=64):
    return [pad(Ether(src="8c:dc:d4:ab:58:48", dst="8c:dc:d4:ab:5b:f0")/IP(src="10.0.0.1", dst="10.1.0.2")/UDP(sport=s, dport=d), size) for s, d, i in flows(n)]


def vxlan(n, size=64, udp_csum=None):
    out = []
    for s, d, i in flows(n):
        inner = Ether(src="52:54:00:a0:81:01", dst="52:54:00:a0:91:02")/IP(src="192.168.1.%d" % (1 + i % 200), dst="192.168.2.16")/UDP(sport=s, dport=d)
        inner = pad(inner, size)
        out.append(Ether(src="8c:dc:d4:ab:58:48", dst="8c:dc:d4:ab:5b:f0")/IP(src="10.1.2.9", dst="10.1.2.8")/UDP(sport=49152 + (i % 1000), dport=4789, chksum=udp_csum)/VXLAN(vni=100, flags=0x08)/inner)
    return out


def mplsogre(n, size=64):
    out = []
    for s, d, i in flows(n):
        label = 812 + (i % 4)
        inner = IP(src="192.168.1.%d" % (1 + i % 200), dst="192.168.%d.16" % (label - 810))/UDP(sport=s, dport=d)
        inner = pad(Ether()/inner, size)[IP]
        out.append(Ether(src="8c:dc:d4:ab:58:48", dst="8c:dc:d4:ab:5b:f0")/IP(src="10.1.2.9", dst="10.1.2.8", proto=47)/GRE(key_present=1, key=0, proto=0x8847)/MPLS(label=label, ttl=4, s=1)/inner)
    return out


def geneve(n, size=128, udp_csum=None):
    out = []
    for s, d, i in flows(n):
        inner = pad(Ether(src="fa:16:3e:e4:0a:cf", dst="fa:16:3e:20:ab:56")/IP(src="192.168.1.61", dst="192.168.1.16")/UDP(sport=s, dport=d), 64)
        g = GENEVE(optionlen=2, proto=0x6558, vni=3, options=b"\x01\x02\x80\x01\x00\x03\x00\x02")
        out.append(Ether(src="ec:0d:9a:44:2c:f5", dst="3c:fd:fe:ee:4a:2c")/IP(src="172.17.2.160", dst="172.17.2.60")/UDP(sport=57025, dport=6081, chksum=udp_csum)/g/inner)
    return out


# --- protocol fixtures ---------------------------------------------------------------------------

def eth(src=M1, dst=M2):
    return Ether(src=src, dst=dst)


def fx_arp():
    return [
        eth(H1, "ff:ff:ff:ff:ff:ff")/ARP(op=1, hwsrc=H1, psrc="10.0.0.1", pdst="10.0.0.2"),
        eth(H2, H1)/ARP(op=2, hwsrc=H2, psrc="10.0.0.2", hwdst=H1, pdst="10.0.0.1"),
        # Gratuitous ARP, padded to the 60-byte Ethernet minimum.
        pad(eth(H1, "ff:ff:ff:ff:ff:ff")/ARP(op=1, hwsrc=H1, psrc="10.0.0.1", hwdst="00:00:00:00:00:00", pdst="10.0.0.1"), 64),
        eth(H1, "ff:ff:ff:ff:ff:ff")/Dot1Q(vlan=10)/ARP(op=1, hwsrc=H1, psrc="10.0.10.1", pdst="10.0.10.2"),
    ]


def fx_vlan():
    return [
        eth()/Dot1Q(vlan=100)/IP(src="10.0.0.1", dst="10.0.0.2")/UDP(sport=40000, dport=5001)/Raw(b"vlan"),
        eth()/Dot1Q(vlan=4094, prio=5, dei=1)/IP(src="10.0.0.1", dst="10.0.0.2")/TCP(sport=40000, dport=80, flags="S"),
        eth()/Dot1AD(vlan=300, prio=2)/Dot1Q(vlan=42, prio=7)/IP(src="10.0.0.1", dst="10.0.0.2")/UDP(sport=40001, dport=5001),
        eth()/Dot1AD(vlan=1)/Dot1Q(vlan=2)/IPv6(src=V6A, dst=V6B)/UDP(sport=40002, dport=5001)/Raw(b"qinq6"),
        eth()/Dot1Q(vlan=0, prio=6)/IP(src="10.0.0.1", dst="10.0.0.2")/ICMP(id=7, seq=1),
    ]


def fx_mpls():
    inner = IP(src="10.0.0.1", dst="10.0.0.2")/UDP(sport=40000, dport=5001)/Raw(b"mpls")
    return [
        eth()/MPLS(label=100, cos=0, s=1, ttl=64)/inner,
        eth()/MPLS(label=100, cos=3, s=0, ttl=64)/MPLS(label=200, cos=5, s=1, ttl=63)/inner,
        eth()/MPLS(label=0xfffff, s=0, ttl=255)/MPLS(label=16, s=0, ttl=1)/MPLS(label=17, s=1, ttl=2)/inner,
        eth()/MPLS(label=2000, s=1, ttl=9)/IPv6(src=V6A, dst=V6B)/UDP(sport=40000, dport=5001),
    ]


def fx_ipv4():
    big = IP(src="10.0.0.1", dst="10.0.0.2", id=0x4242)/TCP(sport=40000, dport=80, flags="PA", seq=1)/Raw(bytes(range(256)) * 3)
    frags = fragment(big, fragsize=256)
    return [
        eth()/IP(src="10.0.0.1", dst="10.0.0.2", options=[IPOption_Router_Alert()])/UDP(sport=40000, dport=5001),
        eth()/IP(src="10.0.0.1", dst="10.0.0.2", options=[IPOption_RR(routers=["192.0.2.1", "192.0.2.2"]), IPOption_NOP()])/ICMP(id=1, seq=2),
        eth()/IP(src="10.0.0.1", dst="10.0.0.2", tos=0xb9, ttl=1, flags="DF", id=0xffff)/UDP(sport=1, dport=65535),
        eth()/frags[0],
        eth()/frags[1],
        eth()/frags[-1],
        eth()/IP(src="10.0.0.1", dst="10.0.0.2")/ICMP(type=8, id=0x1234, seq=1)/Raw(b"abcdefgh"),
        eth()/IP(src="10.0.0.2", dst="10.0.0.1")/ICMP(type=0, id=0x1234, seq=1)/Raw(b"abcdefgh"),
        eth()/IP(src="10.0.0.254", dst="10.0.0.1")/ICMP(type=3, code=3)/IP(src="10.0.0.1", dst="10.0.0.2")/UDP(sport=40000, dport=5001)/Raw(b"x"),
        eth()/IP(src="10.0.0.254", dst="10.0.0.1")/ICMP(type=3, code=4, nexthopmtu=1400)/IP(src="10.0.0.1", dst="10.0.0.2", flags="DF")/UDP(sport=40000, dport=5001),
        eth()/IP(src="10.0.0.254", dst="10.0.0.1")/ICMP(type=11, code=0)/IP(src="10.0.0.1", dst="10.0.0.2", ttl=1)/UDP(sport=40000, dport=33434),
    ]


def fx_ipv6():
    chain = (IPv6(src=V6A, dst=V6B, tc=0x28, fl=0xbeef)
             / IPv6ExtHdrHopByHop(options=[RouterAlert()])
             / IPv6ExtHdrRouting(addresses=["2001:db8::10", "2001:db8::11"], segleft=2)
             / IPv6ExtHdrFragment(id=0x1234, m=0, offset=0)
             / IPv6ExtHdrDestOpt(options=[PadN(optdata=b"\x00" * 4)])
             / UDP(sport=40000, dport=5001)/Raw(b"chain"))
    big = IPv6(src=V6A, dst=V6B)/IPv6ExtHdrFragment(id=0xabcdef)/TCP(sport=40000, dport=80, flags="A")/Raw(bytes(range(200)) * 3)
    frags = fragment6(big, 300)
    return [
        eth()/IPv6(src=V6A, dst=V6B, hlim=3)/UDP(sport=40000, dport=5001)/Raw(b"v6"),
        eth()/chain,
        eth()/IPv6(src=V6A, dst=V6B)/IPv6ExtHdrHopByHop()/IPv6ExtHdrDestOpt()/TCP(sport=40000, dport=22, flags="S"),
        eth()/IPv6(src=V6A, dst=V6B)/IPv6ExtHdrRouting(addresses=[V6B])/ICMPv6EchoRequest(id=1, seq=1, data=b"ping"),
        eth()/frags[0],
        eth()/frags[1],
        eth()/IPv6(src=V6A, dst=V6B)/ICMPv6EchoRequest(id=0x77, seq=9, data=b"hello"),
        eth()/IPv6(src=V6B, dst=V6A)/ICMPv6EchoReply(id=0x77, seq=9, data=b"hello"),
        # Neighbor solicitation with SLL (address resolution) and without (DAD, from ::).
        eth(H1, "33:33:ff:00:00:02")/IPv6(src="fe80::1", dst="ff02::1:ff00:2", hlim=255)/ICMPv6ND_NS(tgt="fe80::2")/ICMPv6NDOptSrcLLAddr(lladdr=H1),
        eth(H1, "33:33:ff:00:00:01")/IPv6(src="::", dst="ff02::1:ff00:1", hlim=255)/ICMPv6ND_NS(tgt="fe80::1"),
        # Neighbor advertisements with TLL: solicited and unsolicited.
        eth(H2, H1)/IPv6(src="fe80::2", dst="fe80::1", hlim=255)/ICMPv6ND_NA(tgt="fe80::2", R=0, S=1, O=1)/ICMPv6NDOptDstLLAddr(lladdr=H2),
        eth(H2, "33:33:00:00:00:01")/IPv6(src="fe80::2", dst="ff02::1", hlim=255)/ICMPv6ND_NA(tgt="fe80::2", R=1, S=0, O=1)/ICMPv6NDOptDstLLAddr(lladdr=H2),
    ]


def fx_tcp():
    ip = IP(src="10.0.0.1", dst="10.0.0.2")
    ipr = IP(src="10.0.0.2", dst="10.0.0.1")
    syn_opts = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (123456, 0)), ("NOP", None), ("WScale", 7)]
    return [
        eth()/ip/TCP(sport=40000, dport=80, seq=1000, flags="S", window=64240, options=syn_opts),
        eth()/ipr/TCP(sport=80, dport=40000, seq=5000, ack=1001, flags="SA", window=65160, options=[("MSS", 1400), ("NOP", None), ("NOP", None), ("SAckOK", b""), ("NOP", None), ("WScale", 9)]),
        eth()/ip/TCP(sport=40000, dport=80, seq=1001, ack=5001, flags="A", options=[("NOP", None), ("NOP", None), ("Timestamp", (123457, 98765))]),
        eth()/ip/TCP(sport=40000, dport=80, seq=1001, ack=5001, flags="PA")/Raw(b"GET / HTTP/1.1\r\n\r\n"),
        eth()/ipr/TCP(sport=80, dport=40000, seq=5001, ack=1019, flags="A", options=[("NOP", None), ("NOP", None), ("SAck", (2000, 3000, 4000, 5000))]),
        eth()/ip/TCP(sport=40000, dport=80, seq=1019, ack=5001, flags="FA"),
        eth()/ipr/TCP(sport=80, dport=40000, seq=5001, flags="R", window=0),
        eth()/ip/TCP(sport=40000, dport=80, seq=1, flags="PAU", urgptr=3)/Raw(b"urgent"),
        eth()/ip/TCP(sport=40000, dport=80, seq=1, flags="SEC"),
        eth()/ip/TCP(sport=40000, dport=80, seq=1, flags="AN"),
        eth()/IPv6(src=V6A, dst=V6B)/TCP(sport=40000, dport=443, flags="S", options=syn_opts),
        eth()/IPv6(src=V6A, dst=V6B)/TCP(sport=40000, dport=443, flags="PA")/Raw(b"\x16\x03\x01"),
    ]


def fx_udp():
    return [
        eth()/IP(src="10.0.0.1", dst="10.0.0.2")/UDP(sport=40000, dport=5001)/Raw(b"udp4"),
        eth()/IP(src="10.0.0.1", dst="10.0.0.2")/UDP(sport=40000, dport=5001, chksum=0)/Raw(b"no checksum"),
        eth()/IP(src="10.0.0.1", dst="10.0.0.2")/UDP(sport=40000, dport=5001),
        eth()/IPv6(src=V6A, dst=V6B)/UDP(sport=40000, dport=5001)/Raw(b"udp6 odd"),
    ]


def fx_sctp():
    return [
        eth()/IP(src="10.0.0.1", dst="10.0.0.2")/SCTP(sport=5000, dport=36412, tag=0)/SCTPChunkInit(init_tag=0x11223344, a_rwnd=106496, n_out_streams=10, n_in_streams=10, init_tsn=0x55667788),
        eth()/IP(src="10.0.0.1", dst="10.0.0.2")/SCTP(sport=5000, dport=36412, tag=0x11223344)/SCTPChunkData(tsn=1, stream_id=1, proto_id=46, beginning=1, ending=1, data=b"s1ap msg"),
        eth()/IP(src="10.0.0.2", dst="10.0.0.1")/SCTP(sport=36412, dport=5000, tag=0x55667788)/SCTPChunkSACK(cumul_tsn_ack=1, a_rwnd=106496)/SCTPChunkData(tsn=9, data=b"odd")/SCTPChunkCookieAck(),
        eth()/IPv6(src=V6A, dst=V6B)/SCTP(sport=3868, dport=3868, tag=7)/SCTPChunkData(tsn=2, data=b"diameter!"),
    ]


def fx_gre():
    o = IP(src="10.1.2.9", dst="10.1.2.8")
    inner4 = IP(src="192.168.1.1", dst="192.168.2.2")/UDP(sport=40000, dport=5001)/Raw(b"gre")
    inner6 = IPv6(src=V6A, dst=V6B)/UDP(sport=40000, dport=5001)
    return [
        eth()/o/GRE(proto=0x0800)/inner4,
        eth()/o/GRE(proto=0x6558, key_present=1, key=0x1001)/Ether(src=H1, dst=H2)/inner4,
        eth()/o/GRE(proto=0x86dd, chksum_present=1)/inner6,
        eth()/o/GRE(proto=0x8847, seqnum_present=1, sequence_number=42)/MPLS(label=1000, s=1, ttl=64)/inner4,
        eth()/o/GRE(proto=0x6558, chksum_present=1, key_present=1, seqnum_present=1, key=0xdeadbeef, sequence_number=0xffffffff)/Ether(src=H1, dst=H2)/Dot1Q(vlan=5)/inner4,
        eth()/o/GRE(proto=0x0800, chksum_present=1, key_present=1, key=7)/inner4,
        eth()/IPv6(src=V6A, dst=V6B)/GRE(proto=0x0800, key_present=1, key=3)/inner4,
    ]


def fx_vxlan():
    o = IP(src="10.1.2.9", dst="10.1.2.8")
    inner = Ether(src=H1, dst=H2)/IP(src="192.168.1.1", dst="192.168.1.2")/UDP(sport=40000, dport=5001)/Raw(b"tenant")
    return [
        eth()/o/UDP(sport=50000, dport=4789)/VXLAN(vni=5000, flags=0x08)/inner,
        eth()/o/UDP(sport=50001, dport=4789)/VXLAN(vni=0xffffff, flags=0x08)/Ether(src=H1, dst=H2)/Dot1Q(vlan=7)/IPv6(src=V6A, dst=V6B)/UDP(sport=1, dport=2),
        eth()/o/UDP(sport=50002, dport=4789)/VXLAN(flags=0x88, gpflags=0x00, gpid=0x0123, vni=10)/inner,
        eth()/o/UDP(sport=50003, dport=4789)/VXLAN(flags=0x88, gpflags=0x48, gpid=0xfffe, vni=11)/inner,
        eth()/IPv6(src=V6A, dst=V6B)/UDP(sport=50004, dport=4789)/VXLAN(vni=42, flags=0x08)/inner,
    ]


def gopt(cls, typ, data):
    return GeneveOptions(classid=cls, type=typ, length=len(data) // 4, data=data)


def fx_geneve():
    o = IP(src="172.17.2.160", dst="172.17.2.60")
    inner = Ether(src=H1, dst=H2)/IP(src="192.168.1.1", dst="192.168.1.2")/UDP(sport=40000, dport=5001)/Raw(b"ovn")
    several = [gopt(0x0102, 0x80, b"\x00\x01\x00\x02"), gopt(0x0101, 0x01, b""), gopt(0xffff, 0x7f, bytes(range(12)))]
    longest = [gopt(0xffff, 0x81, bytes(range(124))), gopt(0xffff, 0x02, bytes(range(120)))]
    return [
        eth()/o/UDP(sport=57000, dport=6081)/GENEVE(proto=0x6558, vni=1)/inner,
        eth()/o/UDP(sport=57001, dport=6081)/GENEVE(proto=0x6558, vni=2, critical=1, options=several)/inner,
        eth()/o/UDP(sport=57002, dport=6081)/GENEVE(proto=0x6558, vni=0xfffffe, oam=1, options=[gopt(0x0100, 0x00, b"\xaa" * 8)])/inner,
        eth()/o/UDP(sport=57003, dport=6081)/GENEVE(proto=0x0800, vni=4)/IP(src="192.168.1.1", dst="192.168.1.2")/ICMP(),
        eth()/o/UDP(sport=57004, dport=6081)/GENEVE(proto=0x86dd, vni=5, critical=1, options=longest)/IPv6(src=V6A, dst=V6B)/UDP(sport=1, dport=2),
        eth()/IPv6(src=V6A, dst=V6B)/UDP(sport=57005, dport=6081)/GENEVE(proto=0x6558, vni=6, options=several[:1])/inner,
    ]


def cut(p, n):
    """The first n bytes of p (kept as Raw: scapy cannot always re-dissect a cut frame)."""
    return Raw(raw(p)[:n])


def fx_truncated():
    """(packet, error layer, error offset, error) tuples."""
    ip = IP(src="10.0.0.1", dst="10.0.0.2")
    out = []
    out.append((cut(eth(), 10), "Ether", 0, "Truncated"))
    out.append((cut(eth()/ip/UDP(), 14 + 12), "IP", 14, "Truncated"))
    out.append((cut(eth()/IP(src="10.0.0.1", dst="10.0.0.2", options=[IPOption_Router_Alert()])/UDP(), 14 + 22), "IP", 14, "Truncated"))
    out.append((cut(eth()/ip/UDP()/Raw(b"x" * 20), 14 + 30), "IP", 14, "Truncated"))
    out.append((eth()/IP(raw(ip/UDP())[:0] + b"\x55" + raw(ip/UDP())[1:]), "IP", 14, "BadVersion"))
    out.append((eth()/IP(b"\x44" + raw(ip/UDP())[1:]), "IP", 14, "BadHeaderLength"))
    out.append((eth()/IP(raw(ip/UDP())[:2] + b"\x00\x13" + raw(ip/UDP())[4:]), "IP", 14, "BadLength"))
    # IP total length says 32: only 12 bytes of TCP header.
    out.append((cut(eth()/IP(src="10.0.0.1", dst="10.0.0.2", len=32)/TCP(), 14 + 32), "TCP", 34, "Truncated"))
    # TCP data offset 10 with only 4 option bytes present.
    out.append((cut(eth()/IP(src="10.0.0.1", dst="10.0.0.2", len=44)/TCP(options=[("MSS", 1460), ("NOP", None), ("WScale", 2), ("NOP", None), ("NOP", None), ("Timestamp", (1, 2))]), 14 + 44), "TCP", 34, "Truncated"))
    out.append((eth()/ip/TCP(dataofs=4), "TCP", 34, "BadHeaderLength"))
    # UDP length runs past the IP payload.
    out.append((eth()/ip/UDP(len=40)/Raw(b"short"), "UDP", 34, "Truncated"))
    out.append((eth()/ip/UDP(len=7), "UDP", 34, "BadLength"))
    out.append((cut(eth()/IPv6(src=V6A, dst=V6B)/UDP()/Raw(b"x" * 10), 14 + 40 + 12), "IPv6", 14, "Truncated"))
    hbh = eth()/IPv6(src=V6A, dst=V6B, plen=8)/IPv6ExtHdrHopByHop(len=1, options=[PadN(optdata=b"\x00" * 12)])/UDP()
    out.append((cut(hbh, 14 + 40 + 8), "IPv6ExtHdrHopByHop", 54, "Truncated"))
    out.append((cut(eth()/IP(src="10.0.0.1", dst="10.0.0.2", len=24, proto=47)/GRE(key_present=1, key=1, proto=0x0800), 14 + 24), "GRE", 34, "Truncated"))
    # UDP payload of 6 bytes where VXLAN needs 8.
    out.append((cut(eth()/IP(src="10.0.0.1", dst="10.0.0.2", len=34)/UDP(sport=1, dport=4789, len=14, chksum=0)/VXLAN(vni=1), 14 + 34), "VXLAN", 42, "Truncated"))
    # GENEVE says 12 option bytes follow; the UDP payload ends 8 bytes short.
    out.append((cut(eth()/IP(src="10.0.0.1", dst="10.0.0.2", len=40)/UDP(sport=1, dport=6081, len=20, chksum=0)/GENEVE(proto=0x6558, options=[gopt(1, 1, b"\x00" * 8)]), 14 + 40), "GENEVE", 42, "Truncated"))
    out.append((cut(eth(H1, "ff:ff:ff:ff:ff:ff")/ARP(pdst="10.0.0.2"), 14 + 20), "ARP", 14, "Truncated"))
    out.append((cut(eth()/Dot1Q(vlan=5)/IP(), 14 + 2), "Dot1Q", 14, "Truncated"))
    out.append((cut(eth()/Dot1AD(vlan=5)/Dot1Q(vlan=6)/IP(), 14 + 4 + 3), "Dot1Q", 18, "Truncated"))
    out.append((cut(eth()/MPLS(label=5, s=0)/MPLS(label=6, s=1)/IP(), 14 + 6), "MPLS", 18, "Truncated"))
    ns = eth()/IPv6(src="fe80::1", dst="ff02::1:ff00:2", hlim=255, plen=16)/ICMPv6ND_NS(tgt="fe80::2")
    out.append((cut(ns, 14 + 40 + 16), "ICMPv6ND_NS", 54, "Truncated"))
    out.append((cut(eth()/IP(src="10.0.0.1", dst="10.0.0.2", len=28, proto=132)/SCTP(), 14 + 28), "SCTP", 34, "Truncated"))
    out.append((cut(eth()/IP(src="10.0.0.1", dst="10.0.0.2", len=24, proto=1)/ICMP(), 14 + 24), "ICMP", 34, "Truncated"))
    return out


# --- writing -------------------------------------------------------------------------------------

def jsonable(v):
    if isinstance(v, Packet):
        if v.__class__.__name__ in ("Raw", "Padding"):
            return raw(v).hex()
        return {"name": v.__class__.__name__, "fields": fields_of(v), "hex": raw(v).hex()}
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):  # includes FlagValue via int()
        return int(v)
    if v is None or isinstance(v, str):
        return v
    try:
        return int(v)
    except (TypeError, ValueError):
        return str(v)


def fields_of(layer):
    return {k: jsonable(v) for k, v in layer.fields.items()}


def describe(p):
    """Layers as scapy dissects the raw bytes: name, offset in the frame, field values."""
    data = raw(p)
    layers = []
    try:
        d = Ether(data)
    except Exception:  # scapy cannot dissect some broken frames; they get no layer list
        return {"len": len(data), "layers": layers}
    layer = d
    while layer is not None and layer.__class__.__name__ != "NoPayload":
        rest = raw(layer)
        entry = {"name": layer.__class__.__name__, "offset": len(data) - len(rest),
                 "fields": fields_of(layer)}
        # Header bytes that are awkward to read back from scapy's option objects.
        name = entry["name"]
        if name in ("IP", "IPerror"):
            entry["options_hex"] = rest[20:(rest[0] & 0x0f) * 4].hex()
        elif name in ("TCP", "TCPerror") and len(rest) >= 13:
            entry["options_hex"] = rest[20:(rest[12] >> 4) * 4].hex()
        elif name == "GENEVE":
            entry["options_hex"] = rest[8:8 + (rest[0] & 0x3f) * 4].hex()
        layers.append(entry)
        layer = layer.payload if len(layer.payload) or layer.payload.__class__.__name__ != "NoPayload" else None
    return {"len": len(data), "layers": layers}


def write(outdir, name, pkts, notes):
    """pkts: list of packets or of (packet, error layer, error offset, error)."""
    path = os.path.join(outdir, name + ".pcap")
    entries, frames = [], []
    for k, item in enumerate(pkts):
        p, expect = (item, None) if not isinstance(item, tuple) else (item[0], item[1:])
        p.time = k * 1e-6
        d = describe(p)
        d["index"] = k
        if expect:
            layer, off, err = expect
            d["layers"] = [l for l in d["layers"] if l["offset"] < off]
            d["expect_error"] = {"layer": layer, "offset": off, "error": err}
        entries.append(d)
        frames.append(p)
    # Exercise the reader: most files are little-endian microsecond pcaps (scapy's default), two
    # are nanosecond and two big-endian.
    nano = name in ("vlan", "sctp")
    endian = ">" if name in ("mpls", "arp") else "<"
    with RawPcapWriter(path, linktype=1, nano=nano, endianness=endian, sync=True) as w:
        w.write_header(None)
        for k, p in enumerate(frames):
            w.write_packet(raw(p), sec=0, usec=k * (1000 if nano else 1))
    with open(os.path.join(outdir, name + ".json"), "w") as f:
        json.dump({"file": name + ".pcap", "nanosecond": nano, "big_endian": endian == ">",
                   "packets": entries}, f, indent=1, sort_keys=True)
        f.write("\n")
    notes.append((name, len(frames)))


DESCRIPTIONS = {
    "plain_8": "seed: 64 B Eth/IPv4/UDP, 10.0.0.1 -> 10.1.0.2, sport 1024..1031",
    "vxlan_l3vpn_8": "seed: Eth/IPv4/UDP 4789/VXLAN VNI 100/Eth/IPv4/UDP (outer checksum set)",
    "vxlan_l3vpn_csum0_8": "seed: as vxlan_l3vpn_8 with outer UDP checksum 0",
    "mplsogre_8": "seed: Eth/IPv4/GRE(key 0)/MPLS labels 812..815 (S=1, TTL 4)/IPv4/UDP",
    "geneve_8": "seed: Eth/IPv4/UDP 6081/GENEVE VNI 3 with OVN option 0x0102/0x80/Eth/IPv4/UDP",
    "geneve_csum0_8": "seed: as geneve_8 with outer UDP checksum 0",
    "arp": "ARP request, reply, padded gratuitous ARP, ARP in 802.1Q (big-endian pcap)",
    "vlan": "802.1Q, PCP/DEI, priority tag VID 0, QinQ 802.1ad+802.1Q over IPv4 and IPv6 (nanosecond pcap)",
    "mpls": "MPLS stacks of 1, 2 and 3 labels over IPv4, one label over IPv6 (big-endian pcap)",
    "ipv4": "IPv4 options (router alert, record route + NOP), DSCP/ECN/DF, fragments (first, middle, last of a TCP segment), ICMP echo request/reply, unreachable (port, frag-needed with MTU), time exceeded with quoted IPv4/UDP",
    "ipv6": "IPv6 plain, HBH+routing+fragment+dest-opts chain, HBH+dest-opts, routing, fragments (first, later), ICMPv6 echo request/reply, NS with SLL, DAD NS, NA with TLL (solicited, unsolicited)",
    "tcp": "TCP SYN (MSS, SACK-permitted, timestamps, NOP, window scale), SYN-ACK, ACK+timestamps, PSH-ACK with data, SACK blocks, FIN, RST, URG, ECE/CWR, NS, and over IPv6",
    "udp": "UDP over IPv4 with and without checksum, empty payload, odd-length payload over IPv6",
    "sctp": "SCTP INIT, DATA, SACK+DATA+COOKIE-ACK (padded chunk), DATA over IPv6 (nanosecond pcap)",
    "gre": "GRE plain IPv4; key + TEB; checksum + IPv6; sequence + MPLS; checksum+key+sequence + TEB/802.1Q; checksum+key + IPv4; over IPv6",
    "vxlan": "VXLAN plain, max VNI with inner 802.1Q/IPv6, GBP (policy id, D and A bits), over IPv6",
    "geneve": "GENEVE without options, several options incl. critical bit and C flag, OAM, IPv4 and IPv6 payloads, two maximal options (252 bytes), over IPv6",
    "truncated": "broken packets: each JSON entry names the layer, offset and error a parser must report (Truncated, BadVersion, BadHeaderLength, BadLength)",
}


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "testdata", "pcap")
    os.makedirs(outdir, exist_ok=True)
    notes = []
    seeds = {
        "plain": plain, "vxlan_l3vpn": vxlan, "mplsogre": mplsogre, "geneve": geneve,
        "vxlan_l3vpn_csum0": lambda n: vxlan(n, udp_csum=0),
        "geneve_csum0": lambda n: geneve(n, udp_csum=0),
    }
    for k, f in seeds.items():
        write(outdir, "%s_8" % k, f(8), notes)
    for name, f in [("arp", fx_arp), ("vlan", fx_vlan), ("mpls", fx_mpls), ("ipv4", fx_ipv4),
                    ("ipv6", fx_ipv6), ("tcp", fx_tcp), ("udp", fx_udp), ("sctp", fx_sctp),
                    ("gre", fx_gre), ("vxlan", fx_vxlan), ("geneve", fx_geneve),
                    ("truncated", fx_truncated)]:
        write(outdir, name, f(), notes)
    with open(os.path.join(outdir, "README.md"), "w") as f:
        f.write("# Packet fixtures of the `wire` tests\n\n"
                "Generated by `scripts/gen-fixtures.py` (scapy 2.8.0; `pip install scapy==2.8.0`);\n"
                "do not edit by hand. Each `NAME.pcap` (classic pcap, Ethernet link type, packet k\n"
                "stamped at k µs) has a `NAME.json` sidecar listing, per packet, the layers scapy\n"
                "dissects (class name, offset in the frame, field values incl. the lengths and\n"
                "checksums scapy computed) and, for broken packets, `expect_error` (layer, offset,\n"
                "error). `crates/wire/tests/fixtures.rs` parses every packet with the views and\n"
                "compares.\n\n| file | packets | contents |\n|---|---|---|\n")
        for name, n in notes:
            f.write("| `%s.pcap` | %d | %s |\n" % (name, n, DESCRIPTIONS[name]))


if __name__ == "__main__":
    main()
