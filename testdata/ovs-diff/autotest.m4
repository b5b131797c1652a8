m4_divert(-1)
# The part of GNU Autotest (and of m4sugar, under whose names Open vSwitch's test files call
# it) that scripts/ovs-diff needs to turn OVS's `tests/*.at` files into shell scenarios that
# run unchanged against either switch. Read by `m4 -P` before ovs-macros.at and
# ofproto-macros.at; autotest-overrides.m4 comes after them and before the test file.
#
# What comes out is shell text with marker lines that scripts/ovs-diff splits on:
#   @@HX-PREPARE@@ ... @@HX-PREPARE-END@@   shell helpers (Autotest's PREPARE_TESTS)
#   @@HX-SETUP@@ LINE TITLE ... @@HX-CLEANUP@@   one scenario (AT_SETUP ... AT_CLEANUP)
# Every AT_CHECK becomes `hx_check_begin @@ID@@ ...` ... `hx_check_end $?` (scenario-lib.sh);
# scripts/ovs-diff numbers the @@ID@@ placeholders of a scenario in text order.
#
# Quoting follows Autotest: an argument loses its outer brackets when collected and is
# rescanned once where it is used, so `[[0-9]]` in a test file reaches the shell as `[0-9]`.

m4_changequote([,])
m4_define([dnl], m4_defn([m4_dnl]))
m4_define([m4_if], m4_defn([m4_ifelse]))
m4_define([m4_copy], [m4_define([$2], m4_defn([$1]))])
m4_define([m4_rename], [m4_copy([$1], [$2])m4_undefine([$1])])
m4_define([m4_ifndef], [m4_ifdef([$1], [$3], [$2])])
m4_define([m4_ifval], [m4_if([$1], [], [$3], [$2])])
m4_define([m4_fatal], [m4_errprint([ovs-diff: m4_fatal: $1
])])
m4_define([m4_include], [])
m4_define([m4_dquote], [[$@]])
m4_define([m4_expand], [$1])

# m4_foreach(VAR, [ITEM, ITEM...], BODY), as in the GNU m4 manual's foreach.
m4_define([m4_foreach], [m4_pushdef([$1])_hx_foreach([$1], ($2), [$3])m4_popdef([$1])])
m4_define([_hx_arg1], [$1])
m4_define([_hx_foreach], [m4_if([$2], [()], [],
  [m4_define([$1], _hx_arg1$2)$3[]$0([$1], (m4_shift$2), [$3])])])

# Diversions: only PREPARE_TESTS matters (shell functions shared by the scenarios).
m4_define([m4_divert_push], [
@@HX-PREPARE@@
])
m4_define([m4_divert_pop], [
@@HX-PREPARE-END@@
])
m4_define([m4_divert_text], [
@@HX-PREPARE@@
$2
@@HX-PREPARE-END@@
])

m4_define([AS_ESCAPE], [$1])
m4_define([AS_VAR_COPY], [eval $1=\$$2])
m4_define([AS_MESSAGE_LOG_FD], [5])
m4_define([AT_LINE], [m4___file__:m4___line__])

m4_define([AT_BANNER], [])
m4_define([AT_TESTED], [])
m4_define([AT_KEYWORDS], [])
m4_define([AT_CAPTURE_FILE], [])
m4_define([AT_XFAIL_IF], [])
m4_define([AT_COPYRIGHT], [])
m4_define([AT_INIT], [])

# (The markers do not start with `#`: m4 would not expand what follows a comment sign.)
m4_define([AT_SETUP], [
@@HX-SETUP@@ m4___line__ $1
])
m4_define([AT_CLEANUP], [
@@HX-CLEANUP@@
])

# AT_DATA(FILE, CONTENTS): CONTENTS written as they are (no shell expansion).
m4_define([AT_DATA], [m4_if([$2], [], [: >$1
], [cat >$1 <<'_HX_DATA_EOF'
$2[]_HX_DATA_EOF
])])

# AT_CHECK(COMMANDS, [STATUS = 0], [STDOUT], [STDERR], [RUN-IF-FAIL], [RUN-IF-PASS])
# Each mode is recorded for scripts/ovs-diff: STDOUT is `literal` (compared), `empty` (the
# command must print nothing), `ignore`, `stdout` (saved in ./stdout for a later check, not
# compared) or `expout` (compared with ./expout); STDERR likewise.
m4_define([AT_CHECK], [_HX_CHECK([$1], [$2], [$3], [$4], [$5], [$6], ['])])
m4_define([AT_CHECK_UNQUOTED], [_HX_CHECK([$1], [$2], [$3], [$4], [$5], [$6], [])])
m4_define([_HX_MODE], [m4_if([$1], [], [empty], [$1], [ignore], [ignore],
  [$1], [ignore-no-diff], [ignore], [$1], [stdout], [stdout], [$1], [stdout-nolog], [stdout],
  [$1], [expout], [expout],
  [$1], [stderr], [stdout], [$1], [stderr-nolog], [stdout], [$1], [experr], [expout],
  [literal])])
m4_define([_HX_CHECK], [hx_check_begin @@ID@@ 'm4_if([$2], [], [0], [$2])' '_HX_MODE([$3])' dnl
'_HX_MODE([$4])' 'AT_LINE'
m4_if(_HX_MODE([$3]), [literal], [cat >"$hx_k.exp" <<$7_HX_EXP_EOF$7
$3@@HXEND@@
_HX_EXP_EOF
])dnl
m4_if(_HX_MODE([$4]), [literal], [cat >"$hx_k.expe" <<$7_HX_EXP_EOF$7
$4@@HXEND@@
_HX_EXP_EOF
])dnl
( $1
) >"$hx_k.out" 2>"$hx_k.err"
hx_check_end $?
m4_if([$5$6], [], [], [if hx_check_passed; then :
$6
else :
$5
fi
])])

# AT_SKIP_IF(CONDITION): the scenario is skipped on both sides (exit 77, as Autotest's).
m4_define([AT_SKIP_IF], [if ( $1 ) >/dev/null 2>&1; then hx_skip 'AT_LINE'; fi
])
# AT_FAIL_IF(CONDITION): recorded as a check that fails (status 99) where CONDITION holds.
m4_define([AT_FAIL_IF], [AT_CHECK([( $1 ) && exit 99 || exit 0], [0], [ignore], [ignore])])
m4_define([AT_CHECK_EUNIT], [AT_FAIL_IF([:])])
m4_divert(0)dnl
