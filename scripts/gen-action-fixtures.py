#!/usr/bin/env python3
"""Generate the header-rewrite fixtures of the datapath's action tests (testdata/actions/).

Every case is an input frame, OVS datapath actions in text form, and the frame OVS's
`odp_execute_actions()` leaves: the expected frame is built by scapy from scratch with the new
field values, so its lengths and checksums are scapy's full computations, the independent check
of the datapath's incremental updates. Files:

  NAME.in.pcap, NAME.out.pcap   one frame each (classic pcap, Ethernet, stamped at 0 s)
  MANIFEST                      one case a line, tab-separated:
                                name, expected result (`ok` or `error:<reason>`), input pcap,
                                expected pcap, actions
A case whose result is an error leaves the packet unchanged (expected frame = input frame).
`crates/datapath/tests/actions_scapy.rs` runs them without scapy.

Tunnel termination (`tnl_pop`) cases go to a second manifest, DECAP, one case a line,
tab-separated:
  name; expected result (`ok` or `drop:<TnlPopDrop name>`); tunnel port kind (`vxlan`,
  `geneve`, `gre`); input pcap (the outer frame); inner pcap (the packet right after the pop:
  an Ethernet frame, or the L3 packet of a GRE legacy_l3 payload); the tunnel metadata and
  packet type the decapsulated packet's key must hold, in OVS datapath flow syntax
  (`tunnel(tun_id=..,src=..,dst=..,tos=..,ttl=..,tp_src=..,tp_dst=..,flags(..)),packet_type(..)`);
  the second pass's actions; the pcap of the frame those actions leave. Drop cases have `-` in
  the last four columns. `crates/datapath/tests/tnl_pop_scapy.rs` and
  `crates/netdev/tests/datapath_scapy.rs` run them.

Needs scapy 2.8.0:  pip install scapy==2.8.0
Usage: scripts/gen-action-fixtures.py [OUTDIR]   (default: testdata/actions next to this
script's parent)
"""
import os
import sys

try:
    import scapy
    from scapy.all import (
        ARP, ICMP, IP, SCTP, TCP, UDP, Dot1AD, Dot1Q, Ether, IPOption_Router_Alert, IPv6,
        IPv6ExtHdrFragment, IPv6ExtHdrRouting, ICMPv6EchoRequest, Raw, RawPcapWriter,
        SCTPChunkData, conf, fragment, raw,
    )
    from scapy.contrib.mpls import MPLS
    from scapy.contrib.geneve import GENEVE, GeneveOptions
    from scapy.layers.l2 import GRE
    from scapy.layers.vxlan import VXLAN
except ImportError:
    sys.exit("scapy is missing: pip install scapy==2.8.0")

if scapy.VERSION != "2.8.0":
    print("warning: fixtures were generated with scapy 2.8.0, this is %s" % scapy.VERSION,
          file=sys.stderr)

conf.verb = 0

H1, H2 = "52:54:00:12:34:01", "52:54:00:12:34:02"
V6A, V6B = "2001:db8::1", "2001:db8::2"
PAYLOAD = b"flowpath rewrite fixture"


def eth(**kw):
    return Ether(src=H1, dst=H2, **kw)


def ip4(**kw):
    kw.setdefault("src", "10.0.0.1")
    kw.setdefault("dst", "10.0.0.2")
    kw.setdefault("id", 0x1234)
    return IP(**kw)


def ip6(**kw):
    kw.setdefault("src", V6A)
    kw.setdefault("dst", V6B)
    return IPv6(**kw)


def tcp(**kw):
    kw.setdefault("sport", 40000)
    kw.setdefault("dport", 80)
    kw.setdefault("seq", 1000)
    kw.setdefault("flags", "PA")
    return TCP(**kw) / Raw(PAYLOAD)


def udp(**kw):
    kw.setdefault("sport", 40001)
    kw.setdefault("dport", 40002)
    return UDP(**kw) / Raw(PAYLOAD)


def sctp(**kw):
    kw.setdefault("sport", 2905)
    kw.setdefault("dport", 2905)
    kw.setdefault("tag", 0xdeadbeef)
    return SCTP(**kw) / SCTPChunkData(tsn=1, stream_id=0, proto_id=46, data=b"abcdefg")


def pad60(b):
    """Ethernet minimum frame padding (without FCS), appended to the built bytes."""
    return b + b"\x00" * max(0, 60 - len(b))


CASES = []


def case(name, actions, inp, out=None, result="ok"):
    """inp/out: scapy packets or bytes; out None means unchanged."""
    inp = inp if isinstance(inp, bytes) else raw(inp)
    out = inp if out is None else (out if isinstance(out, bytes) else raw(out))
    CASES.append((name, result, actions, inp, out))


# --- Ethernet --------------------------------------------------------------------------------

base_tcp = eth() / ip4() / tcp()
case("set_eth_dst", "set(eth(dst=52:54:00:a0:91:10))", base_tcp,
     Ether(src=H1, dst="52:54:00:a0:91:10") / ip4() / tcp())
case("set_eth_src_dst", "set(eth(src=02:00:00:00:00:aa,dst=02:00:00:00:00:bb))", base_tcp,
     Ether(src="02:00:00:00:00:aa", dst="02:00:00:00:00:bb") / ip4() / tcp())
# Masked: the OUI of the source, the NIC part of the destination.
case("set_eth_masked",
     "set(eth(src=0a:0b:0c:00:00:00/ff:ff:ff:00:00:00,dst=00:00:00:aa:bb:cc/00:00:00:ff:ff:ff))",
     base_tcp, Ether(src="0a:0b:0c:12:34:01", dst="52:54:00:aa:bb:cc") / ip4() / tcp())

# --- VLAN ------------------------------------------------------------------------------------

case("push_vlan", "push_vlan(vid=100,pcp=3)", base_tcp,
     eth() / Dot1Q(vlan=100, prio=3) / ip4() / tcp())
case("push_vlan_on_tagged", "push_vlan(vid=200,pcp=0)", eth() / Dot1Q(vlan=10) / ip4() / udp(),
     eth() / Dot1Q(vlan=200) / Dot1Q(vlan=10) / ip4() / udp())
case("push_vlan_8021ad", "push_vlan(tpid=0x88a8,vid=300,pcp=5)",
     eth() / Dot1Q(vlan=10, prio=2) / ip4() / udp(),
     eth() / Dot1AD(vlan=300, prio=5) / Dot1Q(vlan=10, prio=2) / ip4() / udp())
case("pop_vlan", "pop_vlan", eth() / Dot1Q(vlan=10, prio=1) / ip4() / udp(),
     eth() / ip4() / udp())
case("pop_vlan_qinq", "pop_vlan", eth() / Dot1AD(vlan=300) / Dot1Q(vlan=10) / ip6() / udp(),
     eth() / Dot1Q(vlan=10) / ip6() / udp())
case("pop_vlan_untagged", "pop_vlan", base_tcp)
# Offsets must follow the tag: the sets after the push find the moved headers.
case("push_vlan_then_set_ipv4_udp", "push_vlan(vid=5,pcp=0),set(ipv4(ttl=1)),set(udp(src=40007))",
     eth() / ip4() / udp(),
     eth() / Dot1Q(vlan=5) / ip4(ttl=1) / udp(sport=40007))
case("pop_vlan_then_set_tcp", "pop_vlan,set(tcp(dst=8080))",
     eth() / Dot1Q(vlan=10) / ip4() / tcp(), eth() / ip4() / tcp(dport=8080))

# --- MPLS ------------------------------------------------------------------------------------

case("push_mpls", "push_mpls(label=100,tc=1,ttl=64,bos=1,eth_type=0x8847)", eth() / ip4() / udp(),
     eth() / MPLS(label=100, cos=1, ttl=64, s=1) / ip4() / udp())
case("push_mpls_on_vlan", "push_mpls(label=100,tc=0,ttl=10,bos=1,eth_type=0x8848)",
     eth() / Dot1Q(vlan=10) / ip4() / udp(),
     eth() / Dot1Q(vlan=10, type=0x8848) / MPLS(label=100, ttl=10, s=1) / ip4() / udp())
case("push_mpls_on_mpls", "push_mpls(label=200,tc=0,ttl=63,bos=0,eth_type=0x8847)",
     eth() / MPLS(label=100, ttl=64, s=1) / ip4() / udp(),
     eth() / MPLS(label=200, ttl=63, s=0) / MPLS(label=100, ttl=64, s=1) / ip4() / udp())
case("push_mpls_then_set_mpls", "push_mpls(label=7,tc=0,ttl=64,bos=1,eth_type=0x8847),set(mpls(ttl=5))",
     eth() / ip6() / udp(), eth() / MPLS(label=7, ttl=5, s=1) / ip6() / udp())
# The MPLSoGRE seed after tnl_pop and push_eth: Ethernet / MPLS 812 (S, TTL 4) / IPv4 / UDP
# padded to a 64-byte inner frame; the seed's flow pops to IPv4 and rewrites the destination MAC.
seed_inner = IP(src="192.168.1.1", dst="192.168.2.16") / UDP(sport=1024, dport=2000) / Raw(b"\x00" * 18)
case("pop_mpls_seed_mplsogre", "pop_mpls(eth_type=0x800),set(eth(dst=52:54:00:a0:91:10))",
     Ether(src="00:00:00:00:00:00", dst="52:54:00:a0:91:02") / MPLS(label=812, ttl=4, s=1) / seed_inner,
     Ether(src="00:00:00:00:00:00", dst="52:54:00:a0:91:10", type=0x0800) / seed_inner)
case("pop_mpls_not_bos", "pop_mpls(eth_type=0x8847)",
     eth() / MPLS(label=200, ttl=63, s=0) / MPLS(label=100, ttl=64, s=1) / ip4() / udp(),
     eth() / MPLS(label=100, ttl=64, s=1) / ip4() / udp())
case("pop_mpls_on_vlan", "pop_mpls(eth_type=0x86dd)",
     eth() / Dot1Q(vlan=10) / MPLS(label=100, ttl=64, s=1) / ip6() / udp(),
     eth() / Dot1Q(vlan=10, type=0x86dd) / ip6() / udp())
case("set_mpls", "set(mpls(label=300,tc=2,ttl=10,bos=1))",
     eth() / MPLS(label=100, cos=5, ttl=64, s=1) / ip4() / udp(),
     eth() / MPLS(label=300, cos=2, ttl=10, s=1) / ip4() / udp())
case("set_mpls_masked_label", "set(mpls(label=0xab000/0xff000))",
     eth() / MPLS(label=0x12345, cos=5, ttl=64, s=1) / ip4() / udp(),
     eth() / MPLS(label=0xab345, cos=5, ttl=64, s=1) / ip4() / udp())

# --- IPv4 ------------------------------------------------------------------------------------

case("set_ipv4_all_tcp", "set(ipv4(src=10.9.8.7,dst=172.16.0.1,tos=0x28,ttl=17))",
     eth() / ip4(tos=0x01) / tcp(),
     eth() / ip4(src="10.9.8.7", dst="172.16.0.1", tos=0x28, ttl=17) / tcp())
# The non-masked form OVS prints for a kernel datapath: proto and frag are carried and ignored.
case("set_ipv4_nonmasked_tcp", "set(ipv4(src=1.1.1.1,dst=2.2.2.2,proto=6,tos=0,ttl=64,frag=no))",
     eth() / ip4(tos=0xb8, ttl=3) / tcp(),
     eth() / ip4(src="1.1.1.1", dst="2.2.2.2", tos=0, ttl=64) / tcp())
case("set_ipv4_src_udp", "set(ipv4(src=10.9.8.7))", eth() / ip4() / udp(),
     eth() / ip4(src="10.9.8.7") / udp())
case("set_ipv4_dst_udp_csum0", "set(ipv4(dst=192.0.2.99))", eth() / ip4() / udp(chksum=0),
     eth() / ip4(dst="192.0.2.99") / udp(chksum=0))
# DSCP written, ECN kept; the upper half of the source replaced.
case("set_ipv4_masked", "set(ipv4(src=192.168.0.0/255.255.0.0,tos=0xb8/0xfc))",
     eth() / ip4(tos=0x03) / udp(),
     eth() / ip4(src="192.168.0.1", tos=0xbb) / udp())
case("set_ipv4_icmp", "set(ipv4(src=10.9.8.7,dst=10.7.8.9,ttl=9))",
     eth() / ip4() / ICMP(type=8, id=7, seq=1) / Raw(PAYLOAD),
     eth() / ip4(src="10.9.8.7", dst="10.7.8.9", ttl=9) / ICMP(type=8, id=7, seq=1) / Raw(PAYLOAD))
case("set_ipv4_options_udp", "set(ipv4(dst=10.3.3.3,ttl=200))",
     eth() / ip4(options=[IPOption_Router_Alert()]) / udp(),
     eth() / ip4(dst="10.3.3.3", ttl=200, options=[IPOption_Router_Alert()]) / udp())


def first_and_later_fragment(ip_hdr):
    frags = fragment(ip_hdr / UDP(sport=40001, dport=40002) / Raw(bytes(range(64)) * 2), fragsize=64)
    return raw(eth() / frags[0]), raw(eth() / frags[-1])


in_first, in_later = first_and_later_fragment(ip4())
out_first, out_later = first_and_later_fragment(ip4(src="10.9.8.7", dst="10.7.8.9"))
# The first fragment's UDP checksum covers the whole datagram and the new pseudo-header.
case("set_ipv4_first_fragment_udp", "set(ipv4(src=10.9.8.7,dst=10.7.8.9))", in_first, out_first)
# A later fragment has no UDP header: only the IPv4 header changes.
case("set_ipv4_later_fragment", "set(ipv4(src=10.9.8.7,dst=10.7.8.9))", in_later, out_later)


def udp_csum_zero_source():
    """A source address for which the UDP checksum computes to 0 (sent as 0xffff)."""
    probe = IP(raw(ip4(src="10.0.0.0") / udp()))
    c0 = probe[UDP].chksum  # sum S0 = ~c0; adding x = c0 to the source's low word gives 0xffff
    src = "10.0.%d.%d" % (c0 >> 8, c0 & 0xff)
    chk = IP(raw(ip4(src=src) / udp()))[UDP].chksum
    assert chk == 0xffff, hex(chk)
    return src


zsrc = udp_csum_zero_source()
case("set_ipv4_udp_csum_becomes_ffff", "set(ipv4(src=%s))" % zsrc, eth() / ip4() / udp(),
     eth() / ip4(src=zsrc) / udp())

# --- IPv6 ------------------------------------------------------------------------------------

case("set_ipv6_addrs_tcp", "set(ipv6(src=2001:db8::100,dst=2001:db8:1::200))",
     eth() / ip6() / tcp(), eth() / ip6(src="2001:db8::100", dst="2001:db8:1::200") / tcp())
case("set_ipv6_label_tclass_hlimit_udp", "set(ipv6(src=fd00::1,label=0xabcde,tclass=0x20,hlimit=7))",
     eth() / ip6(fl=0x12345, tc=0x03, hlim=64) / udp(),
     eth() / ip6(src="fd00::1", fl=0xabcde, tc=0x20, hlim=7) / udp())
case("set_ipv6_label_masked", "set(ipv6(label=0x00f00/0x00f00))",
     eth() / ip6(fl=0x12345) / udp(), eth() / ip6(fl=0x12f45) / udp())
case("set_ipv6_dst_icmpv6", "set(ipv6(dst=2001:db8::99))",
     eth() / ip6() / ICMPv6EchoRequest(id=1, seq=2, data=PAYLOAD),
     eth() / ip6(dst="2001:db8::99") / ICMPv6EchoRequest(id=1, seq=2, data=PAYLOAD))
# With segments left the checksum covers the routing header's final address, so a change of
# the header's destination (the next hop) leaves it alone; scapy computes it the same way.
rh = IPv6ExtHdrRouting(addresses=["2001:db8::7", "2001:db8::8"], segleft=2)
case("set_ipv6_dst_routing_header_udp", "set(ipv6(src=2001:db8::100,dst=2001:db8::5))",
     eth() / ip6() / rh / udp(),
     eth() / ip6(src="2001:db8::100", dst="2001:db8::5") / rh / udp())

# --- Transport ports -------------------------------------------------------------------------

case("set_tcp_ports", "set(tcp(src=8080,dst=443))", base_tcp, eth() / ip4() / tcp(sport=8080, dport=443))
case("set_tcp_masked", "set(tcp(dst=7936/0xff00))", eth() / ip4() / tcp(dport=0x1234),
     eth() / ip4() / tcp(dport=0x1f34))
case("set_tcp_ipv6", "set(tcp(src=1))", eth() / ip6() / tcp(), eth() / ip6() / tcp(sport=1))
case("set_udp_ports", "set(udp(src=40100,dst=40101))", eth() / ip4() / udp(),
     eth() / ip4() / udp(sport=40100, dport=40101))
case("set_udp_csum0", "set(udp(dst=40199))", eth() / ip4() / udp(chksum=0),
     eth() / ip4() / udp(dport=40199, chksum=0))
case("set_udp_ipv6", "set(udp(dst=40100))", eth() / ip6() / udp(), eth() / ip6() / udp(dport=40100))
case("set_sctp_ports", "set(sctp(src=5000,dst=6000))", eth() / ip4() / sctp(),
     eth() / ip4() / sctp(sport=5000, dport=6000))
# Ethernet padding is not part of the SCTP packet the CRC covers.
case("set_sctp_padded", "set(sctp(dst=7))",
     pad60(raw(eth() / ip4() / SCTP(sport=1, dport=2, tag=5))),
     pad60(raw(eth() / ip4() / SCTP(sport=1, dport=7, tag=5))))
case("set_sctp_ipv6", "set(sctp(src=9))", eth() / ip6() / sctp(), eth() / ip6() / sctp(sport=9))
case("set_udp_padded", "set(udp(src=1))",
     pad60(raw(eth() / ip4() / UDP(sport=5, dport=6) / Raw(b"x"))),
     pad60(raw(eth() / ip4() / UDP(sport=1, dport=6) / Raw(b"x"))))

# --- Missing headers: the packet stays as it is -----------------------------------------------

arp = eth(type=0x0806) / ARP(psrc="10.0.0.1", pdst="10.0.0.2", hwsrc=H1)
case("set_ipv4_on_arp", "set(ipv4(src=1.2.3.4))", arp, result="error:no_ipv4")
case("set_ipv6_on_ipv4", "set(ipv6(hlimit=1))", base_tcp, result="error:no_ipv6")
case("set_tcp_on_udp", "set(tcp(src=1))", eth() / ip4() / udp(), result="error:l4_mismatch")
case("set_udp_on_later_fragment", "set(udp(src=1))", in_later, result="error:no_l4")
case("set_udp_on_icmp", "set(udp(src=1))", eth() / ip4() / ICMP(), result="error:l4_mismatch")
case("pop_mpls_not_mpls", "pop_mpls(eth_type=0x800)", base_tcp, result="error:no_mpls")
case("set_mpls_not_mpls", "set(mpls(ttl=1))", base_tcp, result="error:no_mpls")
case("set_eth_runt", "set(eth(dst=00:00:00:00:00:01))", b"\x01\x02\x03\x04\x05\x06\x07\x08",
     result="error:runt")
# A truncated TCP header: extraction finds no L4.
case("set_tcp_truncated", "set(tcp(dst=1))", raw(eth() / ip4(proto=6) / Raw(b"\x00\x50\x00")),
     result="error:no_l4")


# --- Ethernet push and pop (packet_type) -------------------------------------------------------
# pop_eth leaves the L3 packet (OVS's packet_type (1, ethertype)); push_eth makes it a frame
# again with the packet type's ethertype; tnl_push of an L3 packet carries it as GRE's protocol.
l3_udp = ip4() / udp()
case("pop_eth", "pop_eth", eth() / l3_udp, l3_udp)
case("pop_eth_vlan", "pop_eth", eth() / Dot1Q(vlan=10) / ip6() / tcp(), ip6() / tcp())
case("pop_eth_then_set_ipv4", "pop_eth,set(ipv4(ttl=9))", eth() / l3_udp, ip4(ttl=9) / udp())
case("pop_eth_mpls", "pop_eth", eth() / MPLS(label=100, ttl=64, s=1) / l3_udp,
     MPLS(label=100, ttl=64, s=1) / l3_udp)
case("pop_eth_push_eth", "pop_eth,push_eth(src=02:00:00:00:00:01,dst=02:00:00:00:00:02)",
     eth() / Dot1AD(vlan=300) / Dot1Q(vlan=10) / ip6() / udp(),
     Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=0x86dd) / ip6() / udp())
case("pop_eth_push_eth_mpls_pop_mpls",
     "pop_eth,push_eth(src=00:00:00:00:00:00,dst=52:54:00:a0:91:10),pop_mpls(eth_type=0x800)",
     eth() / MPLS(label=812, ttl=4, s=1) / l3_udp,
     Ether(src="00:00:00:00:00:00", dst="52:54:00:a0:91:10", type=0x0800) / l3_udp)
case("push_eth_on_ethernet", "push_eth(src=00:00:00:00:00:01,dst=00:00:00:00:00:02)",
     base_tcp, result="error:not_l3")


def write_pcap(path, frame):
    with RawPcapWriter(path, linktype=1, sync=True) as w:
        w.write_header(None)
        w.write_packet(frame, sec=0, usec=0)


# --- Tunnel push (tnl_push) ---------------------------------------------------------------------
# The outer headers are built by scapy from the fields; lengths and checksums are scapy's. The
# packets have no datapath hash here, so the UDP source port is the bottom of OVS's range
# (flowpath's entropy hash of the inner headers replaces it in the test, checksum updated).
tnl_inner = eth() / ip4() / udp()
OUTER = dict(dst="8c:dc:d4:ab:58:48", src="8c:dc:d4:ab:5b:f0")
case("tnl_push_vxlan_anchor",
     "tnl_push(tnl_port(2),header(size=50,type=4,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,"
     "dl_type=0x0800),ipv4(src=10.1.2.8,dst=10.1.2.9,proto=17,tos=0,ttl=64,frag=0x4000),"
     "udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x64)),out_port(3))",
     tnl_inner,
     Ether(**OUTER) / IP(src="10.1.2.8", dst="10.1.2.9", ttl=64, flags="DF", id=0)
     / UDP(sport=32768, dport=4789, chksum=0) / VXLAN(flags=0x08, vni=100) / tnl_inner)
case("tnl_push_vxlan_csum",
     "tnl_push(tnl_port(2),header(size=50,type=4,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,"
     "dl_type=0x0800),ipv4(src=10.1.2.8,dst=10.1.2.9,proto=17,tos=0,ttl=64,frag=0x4000),"
     "udp(src=0,dst=4789,csum=0xffff),vxlan(flags=0x8000000,vni=0x64)),out_port(3))",
     tnl_inner,
     Ether(**OUTER) / IP(src="10.1.2.8", dst="10.1.2.9", ttl=64, flags="DF", id=0)
     / UDP(sport=32768, dport=4789) / VXLAN(flags=0x08, vni=100) / tnl_inner)
case("tnl_push_geneve_options",
     "tnl_push(tnl_port(6081),header(size=58,type=5,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,"
     "dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,ttl=64,frag=0x4000),"
     "udp(src=0,dst=6081,csum=0x0),geneve(crit,vni=0x7b,options({class=0x102,type=0x80,len=4,0xa}))),"
     "out_port(100))",
     tnl_inner,
     Ether(**OUTER) / IP(src="1.1.2.88", dst="1.1.2.92", ttl=64, flags="DF", id=0)
     / UDP(sport=32768, dport=6081, chksum=0)
     / GENEVE(vni=0x7b, critical=1, proto=0x6558,
              options=[GeneveOptions(classid=0x102, type=0x80, length=1, data=b"\x00\x00\x00\x0a")])
     / tnl_inner)
case("tnl_push_geneve_ipv6_csum",
     "tnl_push(tnl_port(6081),header(size=70,type=5,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,"
     "dl_type=0x86dd),ipv6(src=2001:db8::1,dst=2001:db8::2,label=0,proto=17,tclass=0x0,hlimit=64),"
     "udp(src=0,dst=6081,csum=0xffff),geneve(vni=0x3)),out_port(100))",
     tnl_inner,
     Ether(**OUTER) / IPv6(src=V6A, dst=V6B, hlim=64) / UDP(sport=32768, dport=6081)
     / GENEVE(vni=3, proto=0x6558) / tnl_inner)
case("tnl_push_gre_key",
     "tnl_push(tnl_port(4),header(size=38,type=3,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,"
     "dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=47,tos=0,ttl=64,frag=0x4000),"
     "gre((flags=0x2000,proto=0x6558),key=0x1c8)),out_port(100))",
     tnl_inner,
     Ether(**OUTER) / IP(src="1.1.2.88", dst="1.1.2.92", ttl=64, flags="DF", id=0, proto=47)
     / GRE(key_present=1, key=0x1c8, proto=0x6558) / tnl_inner)
case("tnl_push_gre_csum",
     "tnl_push(tnl_port(4),header(size=42,type=3,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,"
     "dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=47,tos=0,ttl=64,frag=0x4000),"
     "gre((flags=0x8000,proto=0x6558),csum=0x0)),out_port(100))",
     tnl_inner,
     Ether(**OUTER) / IP(src="1.1.2.88", dst="1.1.2.92", ttl=64, flags="DF", id=0, proto=47)
     / GRE(chksum_present=1, proto=0x6558) / tnl_inner)

# ECN: the outer header takes the inner IP packet's ECN field whatever the template's DSCP, CE
# as ECT(0), as OVS's tunnels (and Linux's) do; a template that sets ECN bits itself keeps
# them; a frame that is not IP leaves them 0.
VX_HDR = ("tnl_push(tnl_port(2),header(size=50,type=4,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,"
          "dl_type=0x0800),ipv4(src=10.1.2.8,dst=10.1.2.9,proto=17,tos=%#x,ttl=64,frag=0x4000),"
          "udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x64)),out_port(3))")
for name, template_tos, inner, outer_tos in [
        ("ect1_dscp", 0x28, eth() / ip4(tos=0xb9) / udp(), 0x29),
        ("ce", 0, eth() / ip4(tos=0x03) / udp(), 0x02),
        ("ipv6_inner_ect0", 0, eth() / ip6(tc=0x2a) / udp(), 0x02),
        ("vlan_inner_ect0", 0, eth() / Dot1Q(vlan=7) / ip4(tos=0x02) / udp(), 0x02),
        ("template_ecn_kept", 0x01, eth() / ip4(tos=0x03) / udp(), 0x01),
        ("not_ip", 0, eth() / ARP(psrc="10.0.0.1", pdst="10.0.0.2"), 0)]:
    case("tnl_push_vxlan_ecn_" + name, VX_HDR % template_tos, inner,
         Ether(**OUTER) / IP(src="10.1.2.8", dst="10.1.2.9", ttl=64, flags="DF", id=0, tos=outer_tos)
         / UDP(sport=32768, dport=4789, chksum=0) / VXLAN(flags=0x08, vni=100) / inner)
case("tnl_push_geneve_ipv6_ecn",
     "tnl_push(tnl_port(6081),header(size=70,type=5,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,"
     "dl_type=0x86dd),ipv6(src=2001:db8::1,dst=2001:db8::2,label=0,proto=17,tclass=0x20,hlimit=64),"
     "udp(src=0,dst=6081,csum=0xffff),geneve(vni=0x3)),out_port(100))",
     eth() / ip4(tos=0x01) / udp(),
     Ether(**OUTER) / IPv6(src=V6A, dst=V6B, hlim=64, tc=0x21) / UDP(sport=32768, dport=6081)
     / GENEVE(vni=3, proto=0x6558) / eth() / ip4(tos=0x01) / udp())


# --- Tunnel termination (tnl_pop) ---------------------------------------------------------------
# The outer frames are built by scapy, lengths and checksums included; the inner frame (or L3
# packet) and the metadata the decapsulated packet's key must hold are written down from the
# same fields. The shapes are the seeds' (testdata/pcap/README.md): VXLAN VNI 100, GENEVE VNI 3
# with OVN's option (class 0x0102, type 0x80, 4 bytes), MPLSoGRE with key 0 and label 812.

DECAP = []

REMOTE, LOCAL = "10.1.2.9", "10.1.2.8"
REMOTE6, LOCAL6 = "2001:db8:1::9", "2001:db8:1::8"
UNDERLAY = dict(src="8c:dc:d4:ab:58:48", dst="8c:dc:d4:ab:5b:f0")
INNER_MACS = dict(src="52:54:00:a0:81:01", dst="52:54:00:a0:91:02")


def inner_l3(tos=0):
    """The inner IPv4 packet every decap case carries, with `tos`."""
    return (IP(src="192.168.1.1", dst="192.168.2.16", id=7, tos=tos) / UDP(sport=1024, dport=2000)
            / Raw(b"\x00" * 18))


def inner_frame(tos=0, vlan=None):
    """The same in an Ethernet frame, under an 802.1Q tag when `vlan` is given."""
    l2 = Ether(**INNER_MACS)
    if vlan is not None:
        l2 = l2 / Dot1Q(vlan=vlan)
    return l2 / inner_l3(tos)


def inner6_frame(tc):
    """An inner Ethernet frame carrying IPv6 with traffic class `tc`."""
    return (Ether(**INNER_MACS) / IPv6(src="2001:db8:2::1", dst="2001:db8:2::2", tc=tc)
            / UDP(sport=1024, dport=2000) / Raw(b"\x00" * 18))


def with_dst(frame):
    """`frame` after the second pass's SET_DST."""
    f = Ether(raw(frame))
    f.dst = "52:54:00:a0:91:99"
    return f


INNER = inner_frame()
INNER_L3 = inner_l3()
SET_DST = "set(eth(dst=52:54:00:a0:91:99))"
INNER_SET = with_dst(INNER)


def flags_text(df=False, csum=False, key=False, oam=False):
    return "flags(%sdf%scsum%skey%soam)" % tuple("+" if f else "-" for f in (df, csum, key, oam))


def tunnel_text(tun_id, src, dst, tos, ttl, tp=None, geneve=None, **flags):
    v6 = ":" in src
    f = ["tun_id=%#x" % tun_id,
         ("ipv6_src=%s" if v6 else "src=%s") % src,
         ("ipv6_dst=%s" if v6 else "dst=%s") % dst,
         "tos=%#x" % tos, "ttl=%d" % ttl]
    if tp:
        f += ["tp_src=%d" % tp[0], "tp_dst=%d" % tp[1]]
    if geneve:
        f.append("geneve(%s)" % geneve)
    f.append(flags_text(**flags))
    return "tunnel(%s)" % ",".join(f)


def decap(name, kind, outer, inner=None, key=None, packet_type="packet_type(ns=0,id=0)",
          actions=None, out=None, result="ok"):
    outer = outer if isinstance(outer, bytes) else raw(outer)
    if result == "ok":
        inner = inner if isinstance(inner, bytes) else raw(inner)
        out = out if isinstance(out, bytes) else raw(out)
        DECAP.append((name, result, kind, outer, inner, key + "," + packet_type, actions, out))
    else:
        DECAP.append((name, result, kind, outer, None, "-", "-", None))


def ip4_outer(**kw):
    kw.setdefault("src", REMOTE)
    kw.setdefault("dst", LOCAL)
    kw.setdefault("ttl", 64)
    kw.setdefault("id", 0)
    return IP(**kw)


def ip6_outer(**kw):
    kw.setdefault("src", REMOTE6)
    kw.setdefault("dst", LOCAL6)
    kw.setdefault("hlim", 64)
    return IPv6(**kw)


def vxlan_frame(ip=None, udp=None, vx=None, inner=INNER, l2=None):
    l2 = l2 if l2 is not None else Ether(**UNDERLAY)
    ip = ip if ip is not None else ip4_outer()
    udp = udp if udp is not None else UDP(sport=49152, dport=4789)
    # flags given: with an Ethernet payload scapy would otherwise set VXLAN-GPE's P flag and
    # next protocol.
    vx = vx if vx is not None else VXLAN(flags=0x08, vni=100)
    return l2 / ip / udp / vx / inner


VX_KEY = tunnel_text(0x64, REMOTE, LOCAL, 0, 64, (49152, 4789), csum=True, key=True)

# VXLAN, the seed's shape: UDP checksum set (so csum in the flags), DF clear.
decap("decap_vxlan", "vxlan", vxlan_frame(), INNER, VX_KEY, actions=SET_DST, out=INNER_SET)
# Checksum 0: csum clear; TOS and TTL copied. The outer DF bit is not: OVS 3.1's
# ip_extract_tnl_md() (lib/netdev-native-tnl.c) sets no df flag on receive (later releases do).
decap("decap_vxlan_csum0_df_tos", "vxlan",
      vxlan_frame(ip=ip4_outer(flags="DF", tos=0x28, ttl=17), udp=UDP(sport=50000, dport=4789, chksum=0)),
      INNER, tunnel_text(0x64, REMOTE, LOCAL, 0x28, 17, (50000, 4789), key=True),
      actions=SET_DST, out=INNER_SET)
# The largest VNI.
decap("decap_vxlan_vni_max", "vxlan", vxlan_frame(vx=VXLAN(flags=0x08, vni=0xffffff)), INNER,
      tunnel_text(0xffffff, REMOTE, LOCAL, 0, 64, (49152, 4789), csum=True, key=True),
      actions=SET_DST, out=INNER_SET)
# Outer 802.1Q tag, and 802.1ad + 802.1Q.
decap("decap_vxlan_vlan", "vxlan", vxlan_frame(l2=Ether(**UNDERLAY) / Dot1Q(vlan=10, prio=3)),
      INNER, VX_KEY, actions=SET_DST, out=INNER_SET)
decap("decap_vxlan_qinq", "vxlan",
      vxlan_frame(l2=Ether(**UNDERLAY) / Dot1AD(vlan=300) / Dot1Q(vlan=10)),
      INNER, VX_KEY, actions=SET_DST, out=INNER_SET)
# IPv6 underlay (its UDP checksum is mandatory); traffic class and hop limit.
decap("decap_vxlan_ipv6", "vxlan",
      vxlan_frame(ip=ip6_outer(tc=0x20, hlim=63)), INNER,
      tunnel_text(0x64, REMOTE6, LOCAL6, 0x20, 63, (49152, 4789), csum=True, key=True),
      actions=SET_DST, out=INNER_SET)
# IPv6 underlay with a destination options header before UDP.
from scapy.all import IPv6ExtHdrDestOpt  # noqa: E402
decap("decap_vxlan_ipv6_dstopts", "vxlan",
      Ether(**UNDERLAY) / ip6_outer() / IPv6ExtHdrDestOpt() / UDP(sport=49152, dport=4789)
      / VXLAN(flags=0x08, vni=100) / INNER, INNER,
      tunnel_text(0x64, REMOTE6, LOCAL6, 0, 64, (49152, 4789), csum=True, key=True),
      actions=SET_DST, out=INNER_SET)
# A datagram shorter than the Ethernet minimum: the padding after it is not payload (and not
# in the UDP checksum). The 4-byte payload is no Ethernet frame: the second pass's set(eth)
# does not apply (a counted rewrite error) and the packet goes out as it is.
tiny = b"\x01\x02\x03\x04"
decap("decap_vxlan_padded", "vxlan", pad60(raw(vxlan_frame(inner=Raw(tiny)))), tiny,
      VX_KEY, actions=SET_DST, out=tiny)

GENEVE_OPT = GeneveOptions(classid=0x0102, type=0x80, length=1, data=b"\x00\x03\x00\x02")
decap("decap_geneve_option", "geneve",
      Ether(**UNDERLAY) / ip4_outer() / UDP(sport=57025, dport=6081)
      / GENEVE(vni=3, proto=0x6558, options=[GENEVE_OPT]) / INNER, INNER,
      tunnel_text(3, REMOTE, LOCAL, 0, 64, (57025, 6081),
                  geneve="{class=0x102,type=0x80,len=4,0x30002}", csum=True, key=True),
      actions=SET_DST, out=INNER_SET)
# OAM and critical bits, two options (one critical), checksum 0.
decap("decap_geneve_oam_two_options", "geneve",
      Ether(**UNDERLAY) / ip4_outer() / UDP(sport=57025, dport=6081, chksum=0)
      / GENEVE(vni=0x123456, proto=0x6558, oam=1, critical=1, options=[
          GENEVE_OPT,
          GeneveOptions(classid=0xffff, type=0x81, length=2, data=bytes(range(1, 9)))])
      / INNER, INNER,
      tunnel_text(0x123456, REMOTE, LOCAL, 0, 64, (57025, 6081),
                  geneve="{class=0x102,type=0x80,len=4,0x30002}"
                         "{class=0xffff,type=0x81,len=8,0x0102030405060708}",
                  key=True, oam=True),
      actions=SET_DST, out=INNER_SET)
decap("decap_geneve_ipv6", "geneve",
      Ether(**UNDERLAY) / ip6_outer() / UDP(sport=57025, dport=6081)
      / GENEVE(vni=3, proto=0x6558) / INNER, INNER,
      tunnel_text(3, REMOTE6, LOCAL6, 0, 64, (57025, 6081), csum=True, key=True),
      actions=SET_DST, out=INNER_SET)


def gre_frame(gre, payload, ip=None):
    ip = ip if ip is not None else ip4_outer(proto=47)
    return Ether(**UNDERLAY) / ip / gre / payload


decap("decap_gre_key", "gre", gre_frame(GRE(key_present=1, key=0x1c8, proto=0x6558), INNER),
      INNER, tunnel_text(0x1c8, REMOTE, LOCAL, 0, 64, key=True), actions=SET_DST, out=INNER_SET)
decap("decap_gre_csum", "gre", gre_frame(GRE(chksum_present=1, proto=0x6558), INNER),
      INNER, tunnel_text(0, REMOTE, LOCAL, 0, 64, csum=True), actions=SET_DST, out=INNER_SET)
decap("decap_gre_csum_key_seq", "gre",
      gre_frame(GRE(chksum_present=1, key_present=1, seqnum_present=1, key=0xfeedf00d,
                    sequence_number=77, proto=0x6558), INNER, ip=ip4_outer(proto=47, flags="DF")),
      INNER, tunnel_text(0xfeedf00d, REMOTE, LOCAL, 0, 64, csum=True, key=True),
      actions=SET_DST, out=INNER_SET)
# MPLSoGRE, the seed: GRE key 0 carrying MPLS, an L3 payload (packet_type=legacy_l3); the
# second pass makes it Ethernet again and pops the label, as OVS's flows do.
mpls_payload = MPLS(label=812, ttl=4, s=1) / INNER_L3
decap("decap_mplsogre", "gre", gre_frame(GRE(key_present=1, key=0, proto=0x8847), mpls_payload),
      mpls_payload, tunnel_text(0, REMOTE, LOCAL, 0, 64, key=True),
      packet_type="packet_type(ns=1,id=0x8847)",
      actions="push_eth(src=00:00:00:00:00:00,dst=52:54:00:a0:91:10),pop_mpls(eth_type=0x800)",
      out=Ether(src="00:00:00:00:00:00", dst="52:54:00:a0:91:10", type=0x0800) / INNER_L3)
# IPv4 in GRE: packet_type (1, 0x0800).
decap("decap_gre_ipv4_payload", "gre", gre_frame(GRE(proto=0x0800), INNER_L3), INNER_L3,
      tunnel_text(0, REMOTE, LOCAL, 0, 64), packet_type="packet_type(ns=1,id=0x800)",
      actions="push_eth(src=02:00:00:00:00:01,dst=02:00:00:00:00:02)",
      out=Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=0x0800) / INNER_L3)
decap("decap_gre_ipv6_underlay", "gre",
      Ether(**UNDERLAY) / ip6_outer(nh=47) / GRE(key_present=1, key=5, proto=0x6558) / INNER,
      INNER, tunnel_text(5, REMOTE6, LOCAL6, 0, 64, key=True), actions=SET_DST, out=INNER_SET)

# ECN on decapsulation, as OVS (and RFC 6040 section 4.2): an outer CE mark goes onto an
# ECN-capable inner IP packet (scapy recomputes its IPv4 checksum), an inner CE stays, an outer
# ECT leaves the inner packet alone, and a non-IP payload is left alone.
for name, outer_tos, before, after in [("ect0", 0x03, 0x2a, 0x2b), ("ect1", 0x23, 0x01, 0x03),
                                       ("ce_stays", 0x03, 0x03, 0x03),
                                       ("outer_ect", 0x02, 0x28, 0x28)]:
    decap("decap_vxlan_ecn_" + name, "vxlan",
          vxlan_frame(ip=ip4_outer(tos=outer_tos), inner=inner_frame(before)), inner_frame(after),
          tunnel_text(0x64, REMOTE, LOCAL, outer_tos, 64, (49152, 4789), csum=True, key=True),
          actions=SET_DST, out=with_dst(inner_frame(after)))
decap("decap_vxlan_ecn_ce_vlan", "vxlan",
      vxlan_frame(ip=ip4_outer(tos=0x03), inner=inner_frame(0x02, vlan=5)), inner_frame(0x03, vlan=5),
      tunnel_text(0x64, REMOTE, LOCAL, 0x03, 64, (49152, 4789), csum=True, key=True),
      actions=SET_DST, out=with_dst(inner_frame(0x03, vlan=5)))
decap("decap_geneve_ipv6_ecn_ce", "geneve",
      Ether(**UNDERLAY) / ip6_outer(tc=0x03) / UDP(sport=57025, dport=6081)
      / GENEVE(vni=3, proto=0x6558) / inner6_frame(0xb9), inner6_frame(0xbb),
      tunnel_text(3, REMOTE6, LOCAL6, 0x03, 64, (57025, 6081), csum=True, key=True),
      actions=SET_DST, out=with_dst(inner6_frame(0xbb)))
decap("decap_gre_ipv4_payload_ecn_ce", "gre", gre_frame(GRE(proto=0x0800), inner_l3(0x02),
                                                        ip=ip4_outer(proto=47, tos=0x03)),
      inner_l3(0x03), tunnel_text(0, REMOTE, LOCAL, 0x03, 64),
      packet_type="packet_type(ns=1,id=0x800)",
      actions="push_eth(src=02:00:00:00:00:01,dst=02:00:00:00:00:02)",
      out=Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=0x0800) / inner_l3(0x03))
# MPLS is not IP: the outer CE does not reach it (OVS neither).
decap("decap_mplsogre_ecn_ce", "gre",
      gre_frame(GRE(key_present=1, key=0, proto=0x8847), mpls_payload, ip=ip4_outer(proto=47, tos=0x03)),
      mpls_payload, tunnel_text(0, REMOTE, LOCAL, 0x03, 64, key=True),
      packet_type="packet_type(ns=1,id=0x8847)",
      actions="push_eth(src=00:00:00:00:00:00,dst=52:54:00:a0:91:10),pop_mpls(eth_type=0x800)",
      out=Ether(src="00:00:00:00:00:00", dst="52:54:00:a0:91:10", type=0x0800) / INNER_L3)

# Drops, one or more per reason.
decap("drop_ip_checksum", "vxlan", vxlan_frame(ip=ip4_outer(chksum=0x1234)),
      result="drop:tunnel_pop_bad_checksum")
decap("drop_udp_checksum", "vxlan", vxlan_frame(udp=UDP(sport=49152, dport=4789, chksum=0x1234)),
      result="drop:tunnel_pop_bad_checksum")
decap("drop_udp_checksum_ipv6", "geneve",
      Ether(**UNDERLAY) / ip6_outer() / UDP(sport=1, dport=6081, chksum=0x1234)
      / GENEVE(vni=3, proto=0x6558) / INNER, result="drop:tunnel_pop_bad_checksum")
decap("drop_gre_checksum", "gre", gre_frame(GRE(chksum_present=1, chksum=0x1234, proto=0x6558), INNER),
      result="drop:tunnel_pop_bad_checksum")
decap("drop_vxlan_flags", "vxlan", vxlan_frame(vx=VXLAN(flags=0x0c, vni=100)),
      result="drop:tunnel_pop_bad_header")
decap("drop_vxlan_no_i", "vxlan", vxlan_frame(vx=VXLAN(flags=0, vni=100)),
      result="drop:tunnel_pop_bad_header")
decap("drop_vxlan_reserved_byte", "vxlan", vxlan_frame(vx=VXLAN(flags=0x08, vni=100, reserved2=1)),
      result="drop:tunnel_pop_bad_header")
decap("drop_ip_options", "vxlan", vxlan_frame(ip=ip4_outer(options=[IPOption_Router_Alert()])),
      result="drop:tunnel_pop_bad_header")
decap("drop_not_udp", "vxlan",
      Ether(**UNDERLAY) / ip4_outer() / TCP(sport=49152, dport=4789) / INNER,
      result="drop:tunnel_pop_bad_header")
decap("drop_not_ip", "vxlan", Ether(**UNDERLAY) / ARP(psrc=REMOTE, pdst=LOCAL),
      result="drop:tunnel_pop_bad_header")
decap("drop_udp_length_short", "vxlan", vxlan_frame(udp=UDP(sport=49152, dport=4789, len=4, chksum=0)),
      result="drop:tunnel_pop_bad_header")
decap("drop_geneve_version", "geneve",
      Ether(**UNDERLAY) / ip4_outer() / UDP(sport=1, dport=6081) / GENEVE(version=1, vni=3, proto=0x6558) / INNER,
      result="drop:tunnel_pop_bad_header")
decap("drop_gre_routing", "gre", gre_frame(GRE(routing_present=1, proto=0x6558), INNER),
      result="drop:tunnel_pop_bad_header")
decap("drop_gre_version1", "gre", gre_frame(GRE(version=1, proto=0x6558), INNER),
      result="drop:tunnel_pop_bad_header")
decap("drop_gre_on_udp", "gre", vxlan_frame(), result="drop:tunnel_pop_bad_header")
decap("drop_ecn_ce_not_ect", "vxlan", vxlan_frame(ip=ip4_outer(tos=0x03)),
      result="drop:tunnel_pop_ecn_ce_not_ect")
decap("drop_ecn_ce_not_ect_ipv6_inner", "geneve",
      Ether(**UNDERLAY) / ip4_outer(tos=0x03) / UDP(sport=57025, dport=6081)
      / GENEVE(vni=3, proto=0x6558) / inner6_frame(0xb8), result="drop:tunnel_pop_ecn_ce_not_ect")
decap("drop_ip_mf", "vxlan", vxlan_frame(ip=ip4_outer(flags="MF")), result="drop:tunnel_pop_fragment")
decap("drop_ip_later_fragment", "vxlan", vxlan_frame(ip=ip4_outer(frag=100)),
      result="drop:tunnel_pop_fragment")
decap("drop_ipv6_fragment", "vxlan",
      Ether(**UNDERLAY) / ip6_outer() / IPv6ExtHdrFragment(m=1, id=9) / UDP(sport=49152, dport=4789)
      / VXLAN(flags=0x08, vni=100) / INNER, result="drop:tunnel_pop_fragment")
decap("drop_geneve_protocol", "geneve",
      Ether(**UNDERLAY) / ip4_outer() / UDP(sport=1, dport=6081) / GENEVE(vni=3, proto=0x0800) / INNER_L3,
      result="drop:tunnel_pop_unknown_protocol")
decap("drop_gre_protocol", "gre", gre_frame(GRE(proto=0x0806), ARP()),
      result="drop:tunnel_pop_unknown_protocol")
# The IPv4 total length says more than the frame holds.
decap("drop_ip_truncated", "vxlan", raw(vxlan_frame())[:-10], result="drop:tunnel_pop_truncated")
# The UDP length says more than the IP datagram holds.
decap("drop_udp_truncated", "vxlan", vxlan_frame(udp=UDP(sport=49152, dport=4789, len=400, chksum=0)),
      result="drop:tunnel_pop_truncated")
# GENEVE options past the datagram.
g = bytearray(raw(Ether(**UNDERLAY) / ip4_outer() / UDP(sport=1, dport=6081, chksum=0)
                  / GENEVE(vni=3, proto=0x6558, options=[GENEVE_OPT])))
g[42] = (g[42] & 0xc0) | 10
decap("drop_geneve_options_truncated", "geneve", bytes(g), result="drop:tunnel_pop_truncated")
decap("drop_vxlan_header_truncated", "vxlan",
      Ether(**UNDERLAY) / ip4_outer() / UDP(sport=49152, dport=4789) / Raw(b"\x08\x00\x00"),
      result="drop:tunnel_pop_truncated")

# An L3 packet pushed as GRE's payload: OVS's `pop_eth,tnl_push(...)` for a legacy_l3 port.
case("tnl_push_gre_l3_payload",
     "pop_eth,tnl_push(tnl_port(4),header(size=38,type=3,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,"
     "dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=47,tos=0,ttl=64,frag=0x4000),"
     "gre((flags=0x2000,proto=0x800),key=0x1c8)),out_port(100))",
     tnl_inner,
     Ether(**OUTER) / IP(src="1.1.2.88", dst="1.1.2.92", ttl=64, flags="DF", id=0, proto=47)
     / GRE(key_present=1, key=0x1c8, proto=0x0800) / ip4() / udp())
case("tnl_push_gre_mpls_l3_payload",
     "pop_eth,tnl_push(tnl_port(4),header(size=38,type=3,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,"
     "dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=47,tos=0,ttl=64,frag=0x4000),"
     "gre((flags=0x2000,proto=0x8847),key=0x0)),out_port(100))",
     eth() / MPLS(label=812, ttl=4, s=1) / ip4() / udp(),
     Ether(**OUTER) / IP(src="1.1.2.88", dst="1.1.2.92", ttl=64, flags="DF", id=0, proto=47)
     / GRE(key_present=1, key=0, proto=0x8847) / MPLS(label=812, ttl=4, s=1) / ip4() / udp())


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "testdata", "actions")
    os.makedirs(outdir, exist_ok=True)
    names = set()
    lines = ["# name\tresult\tinput\texpected\tactions  (generated by scripts/gen-action-fixtures.py)"]
    for name, result, actions, inp, out in CASES:
        assert name not in names, name
        names.add(name)
        if result != "ok":
            assert inp == out
        write_pcap(os.path.join(outdir, name + ".in.pcap"), inp)
        write_pcap(os.path.join(outdir, name + ".out.pcap"), out)
        lines.append("\t".join([name, result, name + ".in.pcap", name + ".out.pcap", actions]))
    with open(os.path.join(outdir, "MANIFEST"), "w") as f:
        f.write("\n".join(lines) + "\n")
    lines = ["# name\tresult\tkind\tinput\tinner\tkey\tactions\texpected  "
             "(generated by scripts/gen-action-fixtures.py)"]
    for name, result, kind, outer, inner, key, actions, out in DECAP:
        assert name not in names, name
        names.add(name)
        write_pcap(os.path.join(outdir, name + ".in.pcap"), outer)
        cols = [name, result, kind, name + ".in.pcap"]
        if inner is None:
            cols += ["-", "-", "-", "-"]
        else:
            write_pcap(os.path.join(outdir, name + ".inner.pcap"), inner)
            write_pcap(os.path.join(outdir, name + ".out.pcap"), out)
            cols += [name + ".inner.pcap", key, actions, name + ".out.pcap"]
        lines.append("\t".join(cols))
    with open(os.path.join(outdir, "DECAP"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("%d cases and %d decap cases in %s" % (len(CASES), len(DECAP), outdir))


if __name__ == "__main__":
    main()
