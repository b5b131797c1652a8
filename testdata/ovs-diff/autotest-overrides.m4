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
m4_rename([OVS_APP_EXIT_AND_WAIT], [_HX_OVS_APP_EXIT_AND_WAIT])
m4_define([OVS_APP_EXIT_AND_WAIT], [m4_if([$1], [ovs-vswitchd], [hx_vswitchd_stop
], [$1], [ovsdb-server], [], [_HX_OVS_APP_EXIT_AND_WAIT($@)])])

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
