# Shell helpers of the scenarios that scripts/ovs-diff makes from OVS's autotest files (see
# autotest.m4): sourced first by every scenario script, on both sides.
#
# A scenario runs twice with the same text, once per side (HX_SIDE): `ovs` starts Debian's
# ovsdb-server and ovs-vswitchd with the dummy datapath exactly as OVS's _OVS_VSWITCHD_START
# does, and the real ovs-vsctl, ovs-ofctl and ovs-appctl talk to them; `fp` puts
# scripts/ovs-diff-translate first in PATH under those three names, so the same commands
# drive flowpath. Every AT_CHECK leaves its output, status and expectations in HX_REC as
# cID.N.{meta,out,err,rc,exp,expe} (ID: the check's place in the scenario text, N: how many
# times it ran), which scripts/ovs-diff compares side by side afterwards.
#
# Environment: HX_SIDE (ovs|fp), HX_REC (record directory), HX_SCHEMA (vswitch.ovsschema),
# HX_WAIT_TIMEOUT (seconds an OVS_WAIT_UNTIL waits), HX_TRANSLATE (fp: the translator),
# HX_SYNTH_LOG (fp: 1 when the scenario reads ovs-vswitchd.log).

LC_ALL=C
export LC_ALL
# What OVS's atlocal says about the build the tests run against (Debian's).
HAVE_OPENSSL=yes
HAVE_PYTHON3=yes
HAVE_IPV6=yes
HAVE_UNBOUND=no
HAVE_BACKTRACE=yes
HAVE_TCA_FLOWER=no
HAVE_TCA_POLICE_PKTRATE=no
IS_WIN32=no
IS_BSD=no
PYTHON3=python3
# The utilities' own alarm (ovs-ofctl, ovs-appctl...), a guard against a hang as in OVS's
# tests/atlocal, which sets 30 s. It also ends an `ovs-ofctl monitor --detach` (SIGALRM) that
# lives longer, whatever OVS_WAIT_UNTIL waits: a scenario whose monitor spans all its checks
# (ofproto.at's "asynchronous message control" ones) takes 3-4 s against OVS but 30 s and more
# against flowpath on a loaded machine, each command there going through the Python
# translation; at 30 s the monitor died midway and the later checks compared a stale log.
# Both sides get the longer guard; the harness's own --timeout still bounds a scenario.
OVS_CTL_TIMEOUT=120
export PYTHON3 OVS_CTL_TIMEOUT
exec 5>>"$HX_REC/wait.log"

# hx_next ID: the record path of this run of check ID, in hx_k.
hx_next() {
    hx_c=0
    [ -f "$HX_REC/n$1" ] && hx_c=$(cat "$HX_REC/n$1")
    hx_c=$((hx_c + 1))
    echo "$hx_c" >"$HX_REC/n$1"
    hx_k="$HX_REC/c$1.$hx_c"
}

# hx_check_begin ID STATUS STDOUT-MODE STDERR-MODE FILE:LINE
hx_check_begin() {
    hx_next "$1"
    printf 'status=%s\nout=%s\nerr=%s\nloc=%s\n' "$2" "$3" "$4" "$5" >"$hx_k.meta"
    hx_out_mode=$3
    hx_err_mode=$4
    if [ "$3" = expout ]; then cp expout "$hx_k.exp" 2>/dev/null || : >"$hx_k.exp"; fi
    if [ "$4" = expout ]; then cp experr "$hx_k.expe" 2>/dev/null || : >"$hx_k.expe"; fi
    if [ -n "$HX_SYNTH_LOG" ]; then
        "$HX_TRANSLATE" check "$hx_k"
    fi
}

# hx_check_end STATUS
hx_check_end() {
    echo "$1" >"$hx_k.rc"
    [ "$hx_out_mode" = stdout ] && cp "$hx_k.out" stdout
    [ "$hx_err_mode" = stdout ] && cp "$hx_k.err" stderr
    # Once flowpath's side cannot be translated, the rest is not worth running.
    if [ "$HX_SIDE" = fp ] && [ -s "$HX_REC/untranslatable" ]; then
        exit 0
    fi
    return 0
}

# hx_check_passed: whether the last check printed what the test expects (for AT_CHECK's
# RUN-IF-PASS and RUN-IF-FAIL).
hx_check_passed() {
    "$HX_TRANSLATE" verdict "$hx_k"
}

# hx_skip FILE:LINE: AT_SKIP_IF held.
hx_skip() {
    echo "AT_SKIP_IF at $1" >"$HX_REC/skipped"
    exit 77
}

# hx_wait ID FILE:LINE: waits until ovs_wait_cond succeeds (OVS_WAIT_UNTIL, OVS_WAIT_WHILE),
# and records whether it did as the check's output.
hx_wait() {
    hx_next "$1"
    printf 'status=0\nout=literal\nerr=ignore\nloc=%s\n' "$2" >"$hx_k.meta"
    printf 'wait succeeded\n' >"$hx_k.exp"
    hx_deadline=$(($(date +%s) + ${HX_WAIT_TIMEOUT:-10}))
    while :; do
        [ -n "$HX_SYNTH_LOG" ] && "$HX_TRANSLATE" check "$hx_k"
        if ovs_wait_cond >/dev/null 2>&1; then
            echo 'wait succeeded' >"$hx_k.out"
            break
        fi
        if [ "$(date +%s)" -ge "$hx_deadline" ]; then
            echo 'wait failed' >"$hx_k.out"
            ovs_wait_failed >/dev/null 2>&1
            break
        fi
        sleep 0.1
    done
    : >"$hx_k.err"
    echo 0 >"$hx_k.rc"
}

# hx_vswitchd_start ENABLE-DUMMY-SUFFIX VSWITCHD-ARGS: _OVS_VSWITCHD_START's daemons (OVS),
# or the beginning of flowpath's configuration (fp: the switch starts in hx_vswitchd_started,
# once add_of_br has said what its bridges are).
hx_vswitchd_start() {
    if [ "$HX_SIDE" = fp ]; then
        "$HX_TRANSLATE" configure
        return
    fi
    touch .conf.db.~lock~
    ovsdb-tool create conf.db "$HX_SCHEMA" || hx_harness_error "ovsdb-tool create failed"
    ovsdb-server --detach --no-chdir --pidfile --log-file \
        --remote=punix:"$OVS_RUNDIR"/db.sock 2>ovsdb-server.stderr ||
        hx_harness_error "ovsdb-server did not start"
    on_exit "hx_kill_pidfile $OVS_RUNDIR/ovsdb-server.pid"
    HX_NOCOUNT=1 ovs-vsctl --no-wait init || hx_harness_error "ovs-vsctl init failed"
    eval "ovs-vswitchd --enable-dummy$1 --disable-system --disable-system-route $2" \
        --detach --no-chdir --pidfile --log-file -vvconn -vofproto_dpif -vunixctl \
        2>ovs-vswitchd.stderr || hx_harness_error "ovs-vswitchd did not start"
    on_exit "hx_kill_pidfile $OVS_RUNDIR/ovs-vswitchd.pid"
}

# hx_kill_pidfile PIDFILE: at the scenario's end, whatever is still running of it.
hx_kill_pidfile() {
    if [ -f "$1" ]; then
        kill "$(cat "$1")" 2>/dev/null
    fi
    return 0
}

hx_vswitchd_started() {
    if [ "$HX_SIDE" = fp ]; then
        "$HX_TRANSLATE" launch || hx_harness_error "flowpath did not start"
        on_exit "\"$HX_TRANSLATE\" stop"
    fi
}

hx_vswitchd_stop() {
    if [ "$HX_SIDE" = fp ]; then
        "$HX_TRANSLATE" stop
        return
    fi
    for hx_d in ovs-vswitchd ovsdb-server; do
        [ -f "$OVS_RUNDIR/$hx_d.pid" ] || continue
        hx_pid=$(cat "$OVS_RUNDIR/$hx_d.pid")
        if [ $hx_d = ovs-vswitchd ]; then
            ovs-appctl -t $hx_d exit --cleanup >/dev/null 2>&1
        else
            ovs-appctl -t $hx_d exit >/dev/null 2>&1
        fi
        for hx_i in 1 2 3 4 5 6 7 8 9 10; do
            hx_running "$hx_pid" || break
            sleep 0.1
        done
    done
}

# hx_running PID: whether process PID still runs. A detached daemon that exited is a zombie
# until init reaps it, which some inits do only every few seconds: a zombie has stopped.
hx_running() {
    hx_state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null)
    [ -n "$hx_state" ] && [ "$hx_state" != Z ] && [ "$hx_state" != X ]
}

# hx_harness_error MESSAGE: the scenario cannot run on this side for a reason of the harness
# or the machine, not of the switch.
hx_harness_error() {
    echo "$1" >>"$HX_REC/harness-error"
    exit 0
}
