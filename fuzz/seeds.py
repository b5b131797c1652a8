#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (not committed; `/fuzz/corpus` is ignored).

corpus/extract: every packet of testdata/pcap/*.pcap as metadata variant 0 (Ethernet), plus
its L3 payload as variant 3/4/5 (packet_type IPv4/IPv6/MPLS) where the ethertype is one of
those. corpus/odp_parse: every flow line of crates/flow/tests/data/ovs-dpdk-dumps/*.txt, and
its key part and action part alone. corpus/of_msg: every OpenFlow message of the testdata/openflow
corpora (OVS's ofp-print.at vectors, what ovs-ofctl sent, the flow mods, the OVN conversation) as
a stream of one (first byte 0x7f: read 12 KiB at a time), and each ovn-controller connection's whole stream.
corpus/ofctl_flow: every flow of crates/ofproto/tests/data/{flows,bad_flows}.txt (the ovs-ofctl
oracle's corpora).

Usage: python3 fuzz/seeds.py   (from the repository root or fuzz/)
"""
import hashlib
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "fuzz" / "corpus"


def pcap_packets(path):
    data = path.read_bytes()
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        end = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        end = ">"
    else:
        raise ValueError(f"{path}: not a classic pcap")
    off = 24
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack(end + "IIII", data[off : off + 16])
        off += 16
        yield data[off : off + incl]
        off += incl


def l3_variant(pkt):
    """(variant, L3 bytes) for an Ethernet frame carrying IPv4, IPv6 or MPLS, after VLANs."""
    ofs = 12
    while ofs + 2 <= len(pkt) and pkt[ofs : ofs + 2] in (b"\x81\x00", b"\x88\xa8"):
        ofs += 4
    ty = pkt[ofs : ofs + 2]
    variant = {b"\x08\x00": 3, b"\x86\xdd": 4, b"\x88\x47": 5}.get(ty)
    return (variant, pkt[ofs + 2 :]) if variant is not None else None


def write(dir_, blob):
    dir_.mkdir(parents=True, exist_ok=True)
    (dir_ / hashlib.sha1(blob).hexdigest()).write_bytes(blob)


def flow_lines(text):
    section = ""
    for line in text.splitlines():
        if line.startswith("### "):
            h = line[4:]
            if h.startswith(("ovs-appctl dpif/dump-flows", "ovs-appctl dpctl/dump-flows")):
                section = "flow"
            elif h.startswith("ovs-appctl tnl/ports/show -v"):
                section = "tnl"
            else:
                section = ""
            continue
        if not line or line.startswith(("flow-dump from", "Listening ports")):
            continue
        if section == "flow":
            yield line
            if ", actions:" in line:
                key, acts = line.split(", actions:", 1)
                yield key.split(", packets:")[0]
                yield acts.split(", dp-extra-info:")[0]
        elif section == "tnl" and " : " in line:
            yield line.split(" : ", 1)[1]


def of_messages():
    """(hex of each message, [(connection, hex)] of the OVN conversation's client messages)."""
    d = ROOT / "testdata" / "openflow"
    out, conv = [], []
    for name in ("ofp-print-at.txt", "ofctl-requests.txt", "flow_mods.txt", "flow_removed.txt",
                 "stats_requests.txt", "stats_replies.txt", "ovn/conversation.txt"):
        for line in (d / name).read_text().splitlines():
            if line.startswith("#"):
                continue
            fields = [f for f in line.split("\t") if len(f) >= 16 and all(c in "0123456789abcdefABCDEF" for c in f)]
            if fields:
                out.append(max(fields, key=len))
                if name.startswith("ovn/") and line.split("\t")[1] == "c2s":
                    conv.append((line.split("\t")[0], out[-1]))
    return out, conv


def main():
    n = 0
    for path in sorted((ROOT / "testdata" / "pcap").glob("*.pcap")):
        for pkt in pcap_packets(path):
            write(OUT / "extract", b"\x00" + pkt)
            n += 1
            l3 = l3_variant(pkt)
            if l3:
                write(OUT / "extract", bytes([l3[0]]) + l3[1])
    m = 0
    for path in sorted((ROOT / "crates/flow/tests/data/ovs-dpdk-dumps").glob("*.txt")):
        for line in flow_lines(path.read_text()):
            write(OUT / "odp_parse", line.encode())
            m += 1
    msgs, conv = of_messages()
    for h in msgs:
        write(OUT / "of_msg", b"\x7f" + bytes.fromhex(h))
    for c in sorted({c for c, _ in conv}):
        write(OUT / "of_msg", b"\x7f" + b"".join(bytes.fromhex(h) for cc, h in conv if cc == c))
    k = 0
    for name in ("flows.txt", "bad_flows.txt"):
        text = (ROOT / "crates/ofproto/tests/data" / name).read_text()
        for line in text.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                write(OUT / "ofctl_flow", line.encode())
                k += 1
    print(f"{n} packets, {m} flow texts, {len(msgs)} OpenFlow messages, {k} ofctl flows")


if __name__ == "__main__":
    main()
