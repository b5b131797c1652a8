#!/bin/sh
# Regenerates the tcp_*.pcap fixtures of tests/tcp_sessions.rs from real Linux TCP sessions
# between two network namespaces joined by a veth pair. Run as root from this directory.
# The capture is taken on the server's veth (the wire as a switch there would see it), with
# offloads off so segments are MSS-sized, and a snap length of 128 (headers only; the reader
# takes segment lengths from the IP header). Needs iptables-legacy (package iptables) for the
# loss and simultaneous-close sessions, since this kernel has no netem.
set -eu
IPT=${IPT:-iptables-legacy}
export IPT
C=h1tcpcli S=h1tcpsrv CA=10.77.0.1 SA=10.77.0.2 PORT=5001
cleanup() { ip netns del $C 2>/dev/null || true; ip netns del $S 2>/dev/null || true; }
trap cleanup EXIT
cleanup
ip netns add $C
ip netns add $S
ip link add h1c0 netns $C type veth peer name h1s0 netns $S
ip -n $C addr add $CA/24 dev h1c0
ip -n $S addr add $SA/24 dev h1s0
for ns in $C $S; do
    dev=$( [ $ns = $C ] && echo h1c0 || echo h1s0 )
    ip -n $ns link set $dev up
    ip -n $ns link set lo up
    ip netns exec $ns ethtool -K $dev tso off gso off gro off >/dev/null 2>&1 || true
done

session() {  # mode, output file
    ip netns exec $S tcpdump -Z root -i h1s0 -s 128 -U -w "$2" tcp port $PORT 2>/dev/null &
    dump=$!
    sleep 1
    ip netns exec $S python3 tcp_session.py server "$1" $SA $PORT &
    srv=$!
    sleep 0.5
    ip netns exec $C python3 tcp_session.py client "$1" $SA $PORT
    wait $srv
    sleep 1
    kill $dump
    wait $dump || true
}

session client_close tcp_client_close.pcap
session server_close tcp_server_close.pcap
session simultaneous tcp_simultaneous_close.pcap
session rst tcp_rst_abort.pcap
ip netns exec $C sysctl -qw net.ipv4.tcp_window_scaling=0
session noscale tcp_no_wscale.pcap
ip netns exec $C sysctl -qw net.ipv4.tcp_window_scaling=1
# 30% of the segments each side receives are lost on arrival (in place of netem loss 30%):
# dropped in INPUT, after the capture point, so the capture holds them and their
# retransmissions. (Dropping in OUTPUT is no loss: TCP sees the error and sends again.)
LOSS="INPUT -p tcp -m statistic --mode random --probability 0.3 -j DROP"
ip netns exec $C $IPT -A $LOSS
ip netns exec $S $IPT -A $LOSS
session loss tcp_loss_retransmit.pcap
ip netns exec $C $IPT -D $LOSS
ip netns exec $S $IPT -D $LOSS
session zerowin tcp_zero_window.pcap
session keepalive tcp_keepalive.pcap
