#!/usr/bin/env python3
"""Writes inputs of the `vhost_msg` fuzz target to crates/netdev/tests/data/fuzz/vhost_msg/:
a front-end's whole set-up of two vrings (as QEMU and DPDK's virtio_user send it), and
variants of it. Each message is `[how, request, payload length, size field]` and the payload
(see crates/netdev/src/vhost/fuzzing_messages.rs): `how` bits 0-1 are the memory files sent
with it, bits 5-7 their size (4 KiB << n)."""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                   "crates/netdev/tests/data/fuzz/vhost_msg")

GET_FEATURES, SET_FEATURES, SET_OWNER, SET_MEM_TABLE = 1, 2, 3, 5
SET_VRING_NUM, SET_VRING_ADDR, SET_VRING_BASE, GET_VRING_BASE = 8, 9, 10, 11
SET_VRING_KICK, SET_VRING_CALL, GET_PROTOCOL_FEATURES, SET_PROTOCOL_FEATURES = 12, 13, 15, 16
GET_QUEUE_NUM, SET_VRING_ENABLE = 17, 18
VERSION_1, PROTOCOL_FEATURES = 1 << 32, 1 << 30
USER = 0x7F00_0000_0000


def msg(request, payload=b"", fds=0, file_shift=4):
    assert len(payload) < 256
    return bytes([fds | (file_shift << 5), request, len(payload), 0]) + payload


def mem_table(size, file_shift, offset=0):
    region = struct.pack("<QQQQ", 0, size, USER, offset)
    return msg(SET_MEM_TABLE, struct.pack("<II", 1, 0) + region, fds=1, file_shift=file_shift)


def vring(i, num=256):
    base = USER + i * 0x4000
    return (msg(SET_VRING_NUM, struct.pack("<II", i, num))
            + msg(SET_VRING_ADDR, struct.pack("<IIQQQQ", i, 0, base, base + 0x2000,
                                              base + 0x1000, 0))
            + msg(SET_VRING_BASE, struct.pack("<II", i, 0))
            + msg(SET_VRING_CALL, struct.pack("<Q", i), fds=1, file_shift=0)
            + msg(SET_VRING_KICK, struct.pack("<Q", i), fds=1, file_shift=0))


def session(mem, features=VERSION_1, extra=b""):
    return (msg(GET_FEATURES) + msg(SET_OWNER) + msg(SET_FEATURES, struct.pack("<Q", features))
            + mem + vring(0) + vring(1) + extra)


SEEDS = {
    # 64 KiB of guest memory in a 64 KiB file: both rings start.
    "session": session(mem_table(0x10000, 4)),
    # With protocol features, queue count and ring enables.
    "session-protocol": session(
        mem_table(0x10000, 4), VERSION_1 | PROTOCOL_FEATURES,
        msg(GET_PROTOCOL_FEATURES) + msg(SET_PROTOCOL_FEATURES, struct.pack("<Q", 0))
        + msg(GET_QUEUE_NUM) + msg(SET_VRING_ENABLE, struct.pack("<II", 0, 1))
        + msg(GET_VRING_BASE, struct.pack("<II", 0, 0))),
    # A region of 64 KiB in a file of 4 KiB: the rings lie past the end of the file.
    "region-past-end-of-file": session(mem_table(0x10000, 0)),
    # A region whose offset puts it past the end of a file that is big enough from 0.
    "region-offset-past-end-of-file": session(mem_table(0x10000, 4, offset=0x8000)),
    # A message announcing more payload than it has.
    "short-payload": msg(GET_FEATURES) + bytes([4, SET_VRING_NUM, 4, 8]) + b"\0\0\0\0",
}

os.makedirs(OUT, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print(f"{len(SEEDS)} inputs in {os.path.relpath(OUT)}")
