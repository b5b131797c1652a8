//! The port backends' log lines, in vlog's `netdev` module (OVS's line format, `vlog/set`
//! levels). What a peer can trigger at will (a vhost-user front-end's bad requests and
//! resets, a connection that keeps failing) is rate-limited as OVS limits such lines, so that
//! a misbehaving guest cannot fill the log; a line the log cannot take is lost, never a panic.

pub(crate) use vlog::RateLimit;

/// Logs `msg` at `level`.
pub(crate) fn log(level: vlog::Level, msg: &str) {
    if let Some(m) = vlog::module("netdev") {
        m.log(level, msg);
    }
}

/// Logs `msg` at `level`, at most as often as `rl` allows.
pub(crate) fn log_rl(rl: &RateLimit, level: vlog::Level, msg: &str) {
    if let Some(m) = vlog::module("netdev") {
        m.log_rl(rl, level, msg);
    }
}

/// The rate limit of what peers trigger: 5 lines at once, then 1 a second (OVS's most
/// common `VLOG_RATE_LIMIT_INIT(60, 5)` for per-packet and per-message complaints).
pub(crate) static PEER: RateLimit = RateLimit::new(60, 5);
