# shellcheck shell=bash
# What the scripts that stop their daemons share (sourced, not run).

# proc_running PID: whether process PID runs. One that has exited and waits for its reaper (a
# zombie) does not: a detached daemon's reaper is init, which in some containers reaps only every
# second or two, and `kill -0` finds a stopped OVS daemon for that long.
proc_running() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    # The state follows the command's name, in parentheses that may hold anything.
    case ${stat##*) } in Z* | X*) return 1 ;; esac
    return 0
}

# proc_wait PID TENTHS: waits up to TENTHS tenths of a second for PID to stop; false if it runs
# still.
proc_wait() {
    local i
    for ((i = 0; i < $2; i++)); do
        proc_running "$1" || return 0
        sleep 0.1
    done
    ! proc_running "$1"
}
