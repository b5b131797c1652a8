#!/usr/bin/env python3
"""Captures what a real ovsdb-server sends an OVSDB client, as inputs of the `ovsdb_msg` fuzz
target, into crates/ovsdb/tests/data/fuzz/ovsdb_msg/ (committed: the regression test replays
them, and they seed the fuzzer's corpus).

A private Debian ovsdb-server with testdata/ovsdb/vswitch.ovsschema runs in a temporary
directory; one client asks for the schema, takes a lock and monitors every column of every table
three times (monitor_cond_since, monitor_cond, monitor: update3, update2 and update
notifications), then ovs-vsctl makes a scripted set of changes. Each input is a first byte
picking the read size, then the bytes the server sent.

Usage: python3 fuzz/ovsdb_seeds.py   (needs ovsdb-server, ovsdb-tool, ovs-vsctl, ovs-appctl)
"""
import json
import os
import pathlib
import socket
import subprocess
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "testdata" / "ovsdb" / "vswitch.ovsschema"
OUT = ROOT / "crates" / "ovsdb" / "tests" / "data" / "fuzz" / "ovsdb_msg"

VSCTL = [
    ["add-br", "br0", "--", "set", "bridge", "br0", "fail_mode=secure", "protocols=OpenFlow13,OpenFlow10"],
    ["add-port", "br0", "p1", "--", "set", "interface", "p1", "type=internal", "ofport_request=7"],
    ["add-port", "br0", "t1", "tag=10", "--", "set", "port", "t1", "trunks=30,20,10"],
    ["set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask=0x6", "external_ids:system-id=abc"],
    ["set", "port", "t1", "tag=11"],
    ["remove", "port", "t1", "trunks", "20"],
    ["remove", "bridge", "br0", "protocols", "OpenFlow10"],
    ["set", "interface", "p1", "options:key=5", "mtu_request=9000"],
    ["remove", "Open_vSwitch", ".", "other_config", "pmd-cpu-mask"],
    ["set-controller", "br0", "tcp:127.0.0.1:6653"],
    ["del-port", "br0", "p1"],
    ["del-br", "br0"],
]


def main():
    schema = json.loads(SCHEMA.read_text())
    with tempfile.TemporaryDirectory() as d:
        sock = f"{d}/db.sock"
        subprocess.run(["ovsdb-tool", "create", f"{d}/conf.db", str(SCHEMA)], check=True)
        subprocess.run(["ovsdb-server", f"{d}/conf.db", f"--remote=punix:{sock}",
                        f"--unixctl={d}/ctl", f"--pidfile={d}/pid", f"--log-file={d}/log",
                        "--detach", "--no-chdir"], check=True)
        try:
            vsctl = ["ovs-vsctl", f"--db=unix:{sock}", "--no-wait"]
            subprocess.run(vsctl + ["init"], check=True)
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            requests = {t: {"columns": sorted(v["columns"])} for t, v in schema["tables"].items()}
            msgs = [
                {"method": "get_schema", "params": ["Open_vSwitch"], "id": "get_schema"},
                {"method": "lock", "params": ["ovs_vswitchd"], "id": "lock"},
                {"method": "monitor_cond_since", "params": ["Open_vSwitch", "m3", requests,
                 "00000000-0000-0000-0000-000000000000"], "id": 1},
                {"method": "monitor_cond", "params": ["Open_vSwitch", "m2", requests], "id": 2},
                {"method": "monitor", "params": ["Open_vSwitch", "m1", requests], "id": 3},
            ]
            for m in msgs:
                s.sendall(json.dumps(m).encode())
            time.sleep(0.3)
            for args in VSCTL:
                subprocess.run(vsctl + args, check=True)
            time.sleep(0.5)
            s.setblocking(False)
            data = b""
            while True:
                try:
                    chunk = s.recv(1 << 20)
                except BlockingIOError:
                    break
                if not chunk:
                    break
                data += chunk
        finally:
            subprocess.run(["ovs-appctl", "-t", f"{d}/ctl", "exit"], check=False)
    OUT.mkdir(parents=True, exist_ok=True)
    # The whole conversation (the schema reply is the first ~27 KB), read 256 bytes at a time.
    (OUT / "server-conversation").write_bytes(b"\xff" + data)
    # Without the schema reply: what follows it, in 7-byte reads, so that the fuzzer's mutations
    # land on table updates.
    _, schema_end = json.JSONDecoder().raw_decode(data.decode())
    (OUT / "server-updates").write_bytes(b"\x06" + data[schema_end:])
    print(f"{len(data)} bytes captured, {len(data) - schema_end} after the schema")


if __name__ == "__main__":
    main()
