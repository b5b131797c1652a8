m4_divert(-1)
# Read by `m4 -P` after OVS's ovs-macros.at and ofproto-macros.at and before a test file:
# the OVS macros whose work depends on which switch runs the scenario become calls to
# scenario-lib.sh, which starts and stops OVS (as _OVS_VSWITCHD_START does) or flowpath.

# OVS_VSWITCHD_START([vsctl-args], [vsctl-output], [=override], [vswitchd-aux-args])
m4_define([OVS_VSWITCHD_START],
  [hx_vswitchd_start '$3' '$4'
   AT_CHECK([add_of_br 0 $1 m4_if([$2], [], [], [| uuidfilt])], [0], [$2])
   hx_vswitchd_started
])
m4_define([_OVS_VSWITCHD_START], [hx_vswitchd_start '' '$1'
hx_vswitchd_started
])
# The log check of OVS_VSWITCHD_STOP is about OVS's own warnings: not compared.
m4_define([OVS_VSWITCHD_STOP], [hx_vswitchd_stop
])
m4_define([OVS_TRAFFIC_VSWITCHD_STOP], [hx_vswitchd_stop
])
# Another daemon (an `ovs-ofctl monitor`): asked to exit, then waited for as OVS does, except
# that its end is seen by hx_running, not `kill -0`: the daemon is detached, so once it exits
# it is a zombie until init reaps it, which some inits do only every few seconds.
m4_define([OVS_APP_EXIT_AND_WAIT], [m4_if([$1], [ovs-vswitchd], [hx_vswitchd_stop
], [$1], [ovsdb-server], [], [AT_CHECK([test -e $OVS_RUNDIR/$1.pid])
   TMPPID=$(cat $OVS_RUNDIR/$1.pid)
   AT_CHECK([ovs-appctl -t $1 exit])
   OVS_WAIT_WHILE([hx_running $TMPPID])])])
m4_define([OVS_APP_EXIT_AND_WAIT_BY_TARGET], [AT_CHECK([test -e $2])
   TMPPID=$(cat $2)
   AT_CHECK([ovs-appctl --target=$1 exit])
   OVS_WAIT_WHILE([hx_running $TMPPID])])

# OVS_WAIT(COMMAND, IF-FAILED, LINE, DESCRIPTION): recorded as a check whose output says
# whether COMMAND came true in time (scenario-lib.sh's hx_wait).
m4_define([OVS_WAIT], [dnl
ovs_wait_cond () {
    $1
}
ovs_wait_failed () {
    :
    $2
}
hx_wait @@ID@@ 'AT_LINE'
])
m4_divert(0)dnl
