# shellcheck shell=bash
# What scripts/ovn-chassis and scripts/ovn-scale share (sourced, not run): an OVN 23.03 central
# (standalone NB and SB ovsdb-servers, ovn-northd) and one chassis (its own ovsdb-server with the
# Open_vSwitch schema, the vswitch, ovn-controller, br-int with datapath_type=netdev and
# fail-mode=secure), everything under a private directory and killed by pidfile at the end.
# The vswitch is Debian's `ovs-vswitchd` or `flowpath run --ovsdb`, given the same options.

# ovn_lab_needs NAME SWITCH FP: exits 77 with the reason when the lab cannot run; sets FP to the
# flowpath binary's absolute path.
ovn_lab_needs() {
    local name=$1 switch=$2
    skip() { echo "$name: SKIP: $*" >&2; exit 77; }
    [ "$(id -u)" = 0 ] || skip "needs root (network namespaces, veth)"
    for t in ovsdb-server ovs-vsctl ovs-ofctl ovs-appctl ovs-vswitchd ovn-northd ovn-controller \
        ovn-nbctl ovn-sbctl; do
        command -v "$t" >/dev/null ||
            skip "$t is missing (apt-get install openvswitch-switch ovn-central ovn-host)"
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
