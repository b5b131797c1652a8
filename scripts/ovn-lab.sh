# shellcheck shell=bash
# What scripts/ovn-chassis, ovn-scale, ovn-throughput and ovn-cloud share (sourced, not run): the
# checks a user of an OVN cloud makes from its "VMs" (network namespaces), and an OVN 23.03 central
# (standalone NB and SB ovsdb-servers, ovn-northd) and one chassis (its own ovsdb-server with the
# Open_vSwitch schema, the vswitch, ovn-controller, br-int with datapath_type=netdev and
# fail-mode=secure), everything under a private directory and killed by pidfile at the end.
# The vswitch is Debian's `ovs-vswitchd` or `flowpath run --ovsdb`, given the same options.

. "$(dirname "${BASH_SOURCE[0]}")/proc.sh"

# ovn_lab_needs NAME SWITCH FP: exits 77 with the reason when the lab cannot run; sets FP to the
# flowpath binary's absolute path.
ovn_lab_needs() {
    local name=$1 switch=$2
    skip() { echo "$name: SKIP: $*" >&2; exit 77; }
    [ "$(id -u)" = 0 ] || skip "needs root (network namespaces, veth)"
    for t in ovsdb-server ovs-vsctl ovs-ofctl ovs-appctl ovs-vswitchd ovn-northd ovn-controller \
        ovn-nbctl ovn-sbctl ping; do
        command -v "$t" >/dev/null ||
            skip "$t is missing (apt-get install openvswitch-switch ovn-central ovn-host" \
                "iputils-ping)"
    done
    if [ "$switch" = flowpath ]; then
        FP=$(realpath "$3" 2>/dev/null) && [ -x "$FP" ] || skip "no flowpath binary (--flowpath BIN)"
    fi
}

# ovn_lab_dirs PREFIX: the private directory LAB, with C (central) and H (the chassis) in it.
# Socket paths must stay short (108 bytes), hence /tmp.
ovn_lab_dirs() {
    LAB=$(mktemp -d "/tmp/$1.XXXXXX")
    C=$LAB/c H=$LAB/h
    mkdir -p "$C" "$H"
}

# ovn_lab_kill: every daemon of the lab, by its pidfile.
ovn_lab_kill() {
    local p
    for p in "$H"/*.pid "$C"/*.pid; do
        [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null
    done
    sleep 0.3
    for p in "$H"/*.pid "$C"/*.pid; do
        [ -f "$p" ] && kill -9 "$(cat "$p")" 2>/dev/null
    done
}

q() { "$@" >/dev/null 2>&1; }
hv() { env OVS_RUNDIR="$H" OVS_LOGDIR="$H" OVS_DBDIR="$H" OVS_SYSCONFDIR="$H" \
    OVN_RUNDIR="$H" OVN_LOGDIR="$H" "$@"; }
nb() { ovn-nbctl --db="$NB" "$@"; }

# ovn_central: NB and SB databases and ovn-northd; sets NB and SB.
ovn_central() {
    local db
    for db in nb sb; do
        ovsdb-tool create "$C/$db.db" "/usr/share/ovn/ovn-$db.ovsschema"
        ovsdb-server --detach --no-chdir --pidfile="$C/$db.pid" --log-file="$C/$db.log" \
            --unixctl="$C/$db.ctl" --remote=punix:"$C/$db.sock" "$C/$db.db"
    done
    NB=unix:$C/nb.sock SB=unix:$C/sb.sock
    ovn-nbctl --db="$NB" init
    ovn-sbctl --db="$SB" init
    ovn-northd --detach --no-chdir --pidfile="$C/northd.pid" --log-file="$C/northd.log" \
        --unixctl="$C/northd.ctl" --ovnnb-db="$NB" --ovnsb-db="$SB"
}

# vswitchd_start SWITCH [OPTION...]: the chassis' vswitch, ovs-vswitchd or flowpath, with the
# given ovs-vswitchd options (--disable-system, --enable-dummy=override...).
vswitchd_start() {
    local switch=$1
    shift
    if [ "$switch" = ovs ]; then
        hv ovs-vswitchd --detach --no-chdir --pidfile --log-file "$@"
    else
        local o a=()
        for o in "$@"; do [ "$o" = --disable-system ] || a+=("$o"); done
        q hv "$FP" run --ovsdb --rundir "$H" --detach --no-chdir --pidfile --log-file "${a[@]}"
    fi
}

# ovn_chassis SWITCH [OPTION...]: the chassis' database, vswitch, br-int and ovn-controller.
ovn_chassis() {
    hv ovsdb-tool create "$H/conf.db" /usr/share/openvswitch/vswitch.ovsschema
    hv ovsdb-server --detach --no-chdir --pidfile --log-file --remote=punix:"$H/db.sock" \
        "$H/conf.db"
    hv ovs-vsctl --no-wait init
    vswitchd_start "$@"
    hv ovs-vsctl --timeout=20 set open . external_ids:system-id=hv1 external_ids:hostname=hv1 \
        external_ids:ovn-remote="$SB" external_ids:ovn-encap-type=geneve \
        external_ids:ovn-encap-ip=127.0.0.1 external_ids:ovn-bridge-datapath-type=netdev \
        -- --may-exist add-br br-int -- set bridge br-int datapath_type=netdev fail-mode=secure \
        other-config:disable-in-band=true
    hv ovn-controller --detach --no-chdir --pidfile --log-file
}

# ---- checks from the "VMs" (NS: a network namespace) --------------------------------------

# ping_check NAME NS DST: "ping NAME: N of 3".
ping_check() {
    local n
    n=$(ip netns exec "$2" ping -c3 -i0.2 -W2 "$3" 2>/dev/null | sed -n 's/.* \([0-9]*\) received.*/\1/p')
    echo "ping $1: ${n:-0} of 3"
}

# wait_listen NS PORT: until a TCP server listens on PORT in NS (at most 5 s).
wait_listen() {
    for _ in $(seq 50); do
        ip netns exec "$1" ss -Hltn "sport = :$2" | grep -q . && return
        sleep 0.1
    done
}

# peer_of NS BIND FROM DST PORT: what a client in FROM connecting to DST:PORT reads from a
# server in NS on BIND:PORT that answers with the peer address it sees ("no answer" when the
# connection fails).
peer_of() {
    ip netns exec "$1" timeout 6 python3 -c "
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('$2', $5)); s.listen(1); c, a = s.accept(); c.sendall(a[0].encode()); c.close()" &
    local server=$!
    wait_listen "$1" "$5"
    ip netns exec "$3" timeout 4 python3 -c "
import socket
try:
    s = socket.create_connection(('$4', $5), timeout=2); print(s.recv(40).decode())
except OSError:
    print('no answer')" 2>&1 | tail -1
    kill $server 2>/dev/null
    wait $server 2>/dev/null
}

# dhcp_check NS MAC: "dhcp: offer ADDR router R lease L" for a DHCPDISCOVER from NS's eth0
# with client address MAC (scapy).
dhcp_check() {
    if ! python3 -c 'import scapy' 2>/dev/null; then
        echo "dhcp: not checked (no scapy)"
        return
    fi
    echo "dhcp: $(ip netns exec "$1" timeout 15 python3 -c "
from scapy.all import BOOTP, DHCP, IP, UDP, Ether, conf, srp1
conf.checkIPaddr = False
p = (Ether(dst='ff:ff:ff:ff:ff:ff', src='$2')
     / IP(src='0.0.0.0', dst='255.255.255.255') / UDP(sport=68, dport=67)
     / BOOTP(chaddr=bytes.fromhex('${2//:/}'), xid=0x1234)
     / DHCP(options=[('message-type', 'discover'), 'end']))
r = srp1(p, iface='eth0', timeout=3, retry=2, verbose=0)
if r is None or DHCP not in r:
    print('no offer')
else:
    o = dict(x for x in r[DHCP].options if isinstance(x, tuple))
    print('offer', r[BOOTP].yiaddr, 'router', o.get('router'), 'lease', o.get('lease_time'))
" 2>&1 | tail -1)"
}

# lb_check CLIENT VIP NS1 NAME1 NS2 NAME2: "load balancer: NAMES" -- the backends in NS1 and
# NS2 answer TCP/80 with their names, and twenty connections from CLIENT to VIP:80 collect them
# (with an even spread, all twenty go to one backend about once in 500 000 runs).
lb_check() {
    local client=$1 vip=$2 s1 s2 seen
    ip netns exec "$3" timeout 20 python3 -c "$(lb_backend "$4")" &
    s1=$!
    ip netns exec "$5" timeout 20 python3 -c "$(lb_backend "$6")" &
    s2=$!
    wait_listen "$3" 80
    wait_listen "$5" 80
    seen=$(ip netns exec "$client" python3 -c "
import socket
seen = set()
for i in range(20):
    try:
        s = socket.create_connection(('$vip', 80), timeout=2); seen.add(s.recv(10).decode())
    except OSError:
        seen.add('no answer')
print(' '.join(sorted(seen)))" 2>&1 | tail -1)
    echo "load balancer: $seen"
    kill "$s1" "$s2" 2>/dev/null
    wait "$s1" "$s2" 2>/dev/null
}
lb_backend() { # NAME: a TCP/80 server (Python) answering every connection with NAME
    echo "
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', 80)); s.listen(16)
while True:
    c, _ = s.accept(); c.sendall(b'$1'); c.close()"
}
