#!/usr/bin/env python3
"""One side of a short TCP session for the conntrack pcap fixtures.

Usage: tcp_session.py server|client MODE ADDR PORT  (see make_tcp_pcaps.sh).
"""
import os
import socket
import struct
import subprocess
import sys
import time

role, mode, addr, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
DATA = 12000  # bytes the client sends in most modes


def recv_all(s):
    n = 0
    while True:
        b = s.recv(65536)
        if not b:
            return n
        n += len(b)


def at(t):
    """Sleeps until wall-clock time t (both sides run on one host, so one clock)."""
    time.sleep(max(0.0, t - time.time()))


def fin_dropped(on):
    """Adds or removes a rule dropping the FINs this namespace receives (after the capture
    point, so they are on the wire, but the stack neither sees nor acknowledges them)."""
    ipt = os.environ.get("IPT", "iptables-legacy")
    op = "-A" if on else "-D"
    rule = ["INPUT", "-p", "tcp", "--tcp-flags", "FIN", "FIN", "-j", "DROP"]
    subprocess.run([ipt, op] + rule, check=True)


def simultaneous_shutdown(s, t):
    """Both sides shut down at t; the first FINs cross on the wire and are lost on arrival,
    so each side is in FIN_WAIT_1 when the other's retransmitted FIN arrives (RFC 9293
    Figure 12: simultaneous close)."""
    fin_dropped(True)
    at(t)
    s.shutdown(socket.SHUT_WR)
    time.sleep(0.1)
    fin_dropped(False)


def server():
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if mode == "zerowin":
        # Small buffer so the window closes quickly; set before listen so it is inherited.
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    ls.bind((addr, port))
    ls.listen(1)
    s, _ = ls.accept()
    if mode in ("client_close", "noscale", "loss"):
        recv_all(s)
        s.sendall(b"ok")
        s.close()
    elif mode == "rst":
        try:
            recv_all(s)
        except ConnectionResetError:
            pass
        s.close()
    elif mode == "server_close":
        s.recv(100)
        s.sendall(b"x" * 3000)
        s.close()
    elif mode == "simultaneous":
        s.recv(1)
        s.sendall(b"y")
        t = struct.unpack("!d", s.recv(8))[0]
        simultaneous_shutdown(s, t)
        recv_all(s)
        s.close()
    elif mode == "zerowin":
        time.sleep(2.0)  # not reading: the window fills, then the client probes
        while True:
            b = s.recv(512)
            if not b:
                break
            time.sleep(0.005)
        s.close()
    elif mode == "keepalive":
        recv_all(s)
        s.close()


def client():
    s = socket.socket()
    if mode == "keepalive":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 1)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)
    s.connect((addr, port))
    if mode in ("client_close", "noscale", "loss"):
        s.sendall(b"a" * DATA)
        s.shutdown(socket.SHUT_WR)
        recv_all(s)
        s.close()
    elif mode == "server_close":
        s.sendall(b"hello")
        recv_all(s)
        s.close()
    elif mode == "simultaneous":
        s.sendall(b"x")
        s.recv(1)
        t = time.time() + 0.2
        s.sendall(struct.pack("!d", t))
        simultaneous_shutdown(s, t)
        recv_all(s)
        s.close()
    elif mode == "rst":
        s.sendall(b"abort me")
        time.sleep(0.2)
        # Linger 0: close sends RST instead of FIN.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    elif mode == "zerowin":
        s.sendall(b"z" * 20000)
        s.shutdown(socket.SHUT_WR)
        recv_all(s)
        s.close()
    elif mode == "keepalive":
        s.sendall(b"k" * 10)
        time.sleep(3.5)  # idle: two or three keep-alive probes
        s.shutdown(socket.SHUT_WR)
        recv_all(s)
        s.close()


server() if role == "server" else client()
