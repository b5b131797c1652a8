//! One BFD session's state machine (RFC 5880 asynchronous mode, as OVS's `lib/bfd.c` runs it):
//! the reception of control packets (section 6.8.6), detection time expiry, poll sequences
//! when the intervals change (section 6.5), decay of the receive interval while no other
//! traffic arrives, and `forwarding_if_rx`. All times are milliseconds on one monotonic clock.

use super::config::Config;
use super::msg::{self, FLAG_FINAL, FLAG_POLL, Msg, State, diag};

/// Why [`Session::receive`] ignores a packet whose IP TTL is not 255 (RFC 5881 section 5).
pub const WRONG_TTL: &str = "TTL is not 255";

/// The session.
#[derive(Clone, Debug)]
pub struct Session {
    pub name: String,
    pub disc: u32,
    pub cfg: Config,
    pub udp_src: u16,
    pub state: State,
    pub diag: u8,
    pub rmt_state: State,
    pub rmt_diag: u8,
    /// Flags sent (poll, final).
    pub flags: u8,
    pub rmt_flags: u8,
    pub rmt_disc: u32,
    pub rmt_mult: u8,
    pub rmt_min_rx: i64,
    pub rmt_min_tx: i64,
    /// bfd.DesiredMinTxInterval and bfd.RequiredMinRxInterval in force.
    pub min_tx: i64,
    pub min_rx: i64,
    poll_min_tx: i64,
    poll_min_rx: i64,
    pub last_tx: i64,
    pub next_tx: i64,
    pub detect_time: i64,
    last_forwarding: bool,
    /// `bfd/set-forwarding`: `Some(v)` overrides forwarding.
    pub forwarding_override: Option<bool>,
    forwarding_if_rx_detect_time: i64,
    demand_rx_bfd_time: i64,
    in_decay: bool,
    decay_rx_ctl: u64,
    decay_rx_packets: u64,
    decay_detect_time: i64,
    /// The interface's received packets when last looked at (`forwarding_if_rx`).
    rx_packets: u64,
    pub flap_count: u64,
    /// The status the database shows may differ.
    pub status_changed: bool,
}

impl Session {
    /// A new session, Down, with discriminator `disc` and UDP source port `udp_src`.
    pub fn new(name: &str, disc: u32, udp_src: u16, cfg: Config, now: i64) -> Session {
        let mut s = Session {
            name: name.to_owned(),
            disc,
            udp_src,
            state: State::AdminDown,
            diag: diag::NONE,
            rmt_state: State::AdminDown,
            rmt_diag: diag::NONE,
            flags: 0,
            rmt_flags: 0,
            rmt_disc: 0,
            rmt_mult: 0,
            rmt_min_rx: 0,
            rmt_min_tx: 0,
            min_tx: 1000,
            min_rx: 0,
            poll_min_tx: 0,
            poll_min_rx: 0,
            last_tx: 0,
            next_tx: 0,
            detect_time: 0,
            last_forwarding: false,
            forwarding_override: None,
            forwarding_if_rx_detect_time: 0,
            demand_rx_bfd_time: 0,
            in_decay: false,
            decay_rx_ctl: 0,
            decay_rx_packets: 0,
            decay_detect_time: 0,
            rx_packets: 0,
            flap_count: 0,
            status_changed: true,
            cfg: cfg.clone(),
        };
        s.cfg.min_tx = 0;
        s.cfg.min_rx = 0;
        s.cfg.decay_min_rx = -1;
        s.cfg.cpath_down = false;
        s.cfg.forwarding_if_rx = false;
        // As OVS's, which goes Down from its zeroed state before it reads its configuration.
        s.set_state(State::Down, diag::NONE, now);
        s.configure(cfg, now);
        s
    }

    /// Applies a new configuration, starting a poll sequence when the intervals change
    /// (OVS's `bfd_configure()`).
    pub fn configure(&mut self, cfg: Config, now: i64) {
        let mut need_poll = false;
        let old_mult = self.cfg.mult;
        let (old_tx, old_rx, old_decay) = (self.cfg.min_tx, self.cfg.min_rx, self.cfg.decay_min_rx);
        let (old_cpath, old_if_rx) = (self.cfg.cpath_down, self.cfg.forwarding_if_rx);
        self.cfg = cfg;
        if self.cfg.min_tx != old_tx {
            if self.state != State::Up || (!self.in_poll() && self.cfg.min_tx < self.min_tx) {
                self.min_tx = self.cfg.min_tx;
            }
            need_poll = true;
        }
        let rx_changed = self.cfg.min_rx != old_rx;
        if rx_changed {
            if self.state != State::Up || (!self.in_poll() && self.cfg.min_rx > self.min_rx) {
                self.min_rx = self.cfg.min_rx;
            }
            need_poll = true;
        }
        if self.cfg.decay_min_rx != old_decay || rx_changed {
            self.in_decay = false;
            self.decay_update(now);
            need_poll = true;
        }
        if self.cfg.cpath_down != old_cpath {
            self.set_state(self.state, diag::NONE, now);
            need_poll = true;
        }
        if self.cfg.forwarding_if_rx != old_if_rx {
            if self.state == State::Up && self.cfg.forwarding_if_rx {
                self.forwarding_if_rx_update(now);
            } else {
                self.forwarding_if_rx_detect_time = 0;
            }
        } else if self.state == State::Up && self.cfg.forwarding_if_rx && old_mult != self.cfg.mult
        {
            self.forwarding_if_rx_update(now);
        }
        if need_poll {
            self.poll();
        }
    }

    fn in_poll(&self) -> bool {
        self.flags & FLAG_POLL != 0
    }

    fn poll(&mut self) {
        if self.state > State::Down && !self.in_poll() && self.flags & FLAG_FINAL == 0 {
            self.poll_min_tx = self.cfg.min_tx;
            self.poll_min_rx = if self.in_decay {
                self.cfg.decay_min_rx
            } else {
                self.cfg.min_rx
            };
            self.flags |= FLAG_POLL;
            self.next_tx = 0;
            self.log_info(&format!("{}: Initiating poll sequence", self.name));
        }
    }

    /// The TX interval this side advertises: at least a second while not Up (RFC 5880
    /// section 6.8.3).
    pub fn local_min_tx(&self) -> i64 {
        if self.state == State::Up {
            self.min_tx
        } else {
            self.min_tx.max(1000)
        }
    }

    /// The interval between two transmissions.
    pub fn tx_interval(&self) -> i64 {
        self.local_min_tx().max(self.rmt_min_rx)
    }

    /// The interval at which the peer's packets arrive.
    pub fn rx_interval(&self) -> i64 {
        self.min_rx.max(self.rmt_min_tx)
    }

    /// Schedules the next transmission `interval` less 0 to 25% (10 to 25% with a multiplier
    /// of 1), `jitter` being a random number.
    fn set_next_tx(&mut self, jitter: u32) {
        let interval = self.tx_interval();
        let pct = if self.cfg.mult == 1 {
            10 + i64::from(jitter % 16)
        } else {
            i64::from(jitter % 26)
        };
        self.next_tx = self.last_tx + interval - interval * pct / 100;
    }

    fn set_state(&mut self, state: State, diag_: u8, now: i64) {
        let diag_ = if self.cfg.cpath_down {
            diag::CPATH_DOWN
        } else {
            diag_
        };
        if self.state == state && self.diag == diag_ {
            return;
        }
        log_state_change(self, state, diag_, now);
        self.state = state;
        self.diag = diag_;
        if state <= State::Down {
            self.rmt_state = State::Down;
            self.rmt_diag = diag::NONE;
            self.rmt_min_rx = 1;
            self.rmt_flags = 0;
            self.rmt_disc = 0;
            self.rmt_min_tx = 0;
            if self.in_decay {
                self.min_rx = self.cfg.min_rx;
                self.in_decay = false;
            }
        }
        if state == State::Up && self.cfg.decay_min_rx != 0 {
            self.decay_update(now);
        }
        self.status_changed = true;
    }

    /// Whether the interface may forward (OVS's `bfd_forwarding()`), counting a flap when
    /// that changes.
    pub fn forwarding(&mut self, now: i64) -> bool {
        if let Some(v) = self.forwarding_override {
            return v;
        }
        let if_rx = self.cfg.forwarding_if_rx
            && self.forwarding_if_rx_detect_time > now
            && self.demand_rx_bfd_time > now;
        let fwd = (self.state == State::Up || if_rx)
            && ![diag::PATH_DOWN, diag::CPATH_DOWN, diag::RCPATH_DOWN].contains(&self.rmt_diag);
        if fwd != self.last_forwarding {
            self.last_forwarding = fwd;
            self.flap_count += 1;
            self.status_changed = true;
        }
        fwd
    }

    /// When the session needs [`Session::run`] or a transmission next.
    pub fn wake_time(&self) -> i64 {
        if self.flags & FLAG_FINAL != 0 {
            return 0;
        }
        if self.state > State::Down {
            self.next_tx.min(self.detect_time)
        } else {
            self.next_tx
        }
    }

    /// The timers (OVS's `bfd_run()`): detection time expiry, decay, and a poll sequence when
    /// the intervals in force are not the configured ones. `rx_packets` is what the interface
    /// has received in all, `None` when it keeps no count: then no data is seen and the
    /// session never decays.
    pub fn run(&mut self, now: i64, rx_packets: Option<u64>) {
        let old_in_decay = self.in_decay;
        if self.state > State::Down && now >= self.detect_time {
            self.set_state(State::Down, diag::EXPIRED, now);
        }
        if let Some(rx) = rx_packets {
            if self.cfg.forwarding_if_rx && rx != self.rx_packets {
                self.forwarding(now);
                self.forwarding_if_rx_update(now);
            }
            self.rx_packets = rx;
        }
        self.forwarding(now);
        if self.state == State::Up && self.cfg.decay_min_rx > 0 && now >= self.decay_detect_time {
            // Decays when barely more than the control packets arrived (twice as many, for
            // the counters' lag).
            self.in_decay = rx_packets.is_some_and(|rx| {
                rx.saturating_sub(self.decay_rx_packets) <= 2 * self.decay_rx_ctl.max(1)
            });
            self.decay_update(now);
        }
        if self.min_tx != self.cfg.min_tx
            || (self.min_rx != self.cfg.min_rx && self.min_rx != self.cfg.decay_min_rx)
            || self.in_decay != old_in_decay
        {
            self.poll();
        }
    }

    fn decay_update(&mut self, now: i64) {
        self.decay_rx_packets = self.rx_packets;
        self.decay_rx_ctl = 0;
        self.decay_detect_time = self.cfg.decay_min_rx.max(2000) + now;
    }

    fn forwarding_if_rx_update(&mut self, now: i64) {
        let incr = self.rx_interval() * i64::from(self.cfg.mult);
        self.forwarding_if_rx_detect_time = incr.max(2000) + now;
    }

    /// Whether a control packet is due.
    pub fn should_send(&self, now: i64) -> bool {
        self.flags & FLAG_FINAL != 0 || now >= self.next_tx
    }

    /// The next control packet, the transmission being recorded at `now` (OVS's
    /// `bfd_put_packet()`).
    pub fn compose(&mut self, now: i64, jitter: u32) -> Msg {
        let (min_tx, min_rx) = if self.in_poll() {
            (self.poll_min_tx, self.poll_min_rx)
        } else {
            (self.local_min_tx(), self.min_rx)
        };
        let us = |ms: i64| u32::try_from(ms.saturating_mul(1000)).unwrap_or(u32::MAX);
        let m = Msg {
            version: msg::VERSION,
            diag: self.diag,
            state: self.state,
            flags: self.flags,
            mult: self.cfg.mult,
            length: msg::MSG_LEN as u8,
            my_disc: self.disc,
            your_disc: self.rmt_disc,
            min_tx_us: us(min_tx),
            min_rx_us: us(min_rx),
            min_rx_echo_us: 0,
        };
        self.flags &= !FLAG_FINAL;
        self.last_tx = now;
        self.set_next_tx(jitter);
        m
    }

    /// A control packet received with IP TTL `ttl`, already checked by [`Msg::decode`]
    /// (RFC 5880 section 6.8.6, OVS's `bfd_process_packet()`). `Err` names why the session
    /// ignored it.
    pub fn receive(&mut self, m: &Msg, ttl: u8, now: i64) -> Result<(), &'static str> {
        self.decay_rx_ctl += 1;
        self.forwarding(now);
        let r = self.receive_checked(m, ttl, now);
        self.forwarding(now);
        r
    }

    fn receive_checked(&mut self, m: &Msg, ttl: u8, now: i64) -> Result<(), &'static str> {
        if ttl != 255 {
            return Err(WRONG_TTL);
        }
        if m.your_disc != 0 && m.your_disc != self.disc {
            return Err("Incorrect your_disc");
        }
        if self.rmt_state != m.state {
            self.status_changed = true;
        }
        self.rmt_disc = m.my_disc;
        self.rmt_state = m.state;
        self.rmt_flags = m.flags;
        self.rmt_diag = m.diag;
        if m.flags & FLAG_FINAL != 0 && self.in_poll() {
            self.min_tx = self.poll_min_tx;
            self.min_rx = self.poll_min_rx;
            self.flags &= !FLAG_POLL;
            self.log_msg(vlog::Level::Info, Some(m), "Poll sequence terminated", now);
        }
        if m.flags & FLAG_POLL != 0 {
            self.flags &= !FLAG_POLL;
            self.flags |= FLAG_FINAL;
        }
        if self.rmt_mult != m.mult {
            self.log_info(&format!(
                "Interface {} remote mult value {} changed to {}",
                self.name, self.rmt_mult, m.mult
            ));
            self.rmt_mult = m.mult;
        }
        let rmt_min_rx = i64::from(m.min_rx_us / 1000).max(1);
        if self.rmt_min_rx != rmt_min_rx {
            self.rmt_min_rx = rmt_min_rx;
            if self.next_tx != 0 {
                self.set_next_tx(0);
            }
            self.log_msg(vlog::Level::Info, Some(m), "New remote min_rx", now);
        }
        self.rmt_min_tx = i64::from(m.min_tx_us / 1000).max(1);
        self.detect_time = self.rx_interval() * i64::from(self.rmt_mult) + now;
        if self.state == State::AdminDown {
            return Ok(());
        }
        let next = match (self.state, m.state) {
            (s, State::AdminDown) if s != State::Down => Some((State::Down, diag::RMT_DOWN)),
            (State::Down, State::Down) => Some((State::Init, self.diag)),
            (State::Down, State::Init) | (State::Init, State::Init | State::Up) => {
                Some((State::Up, self.diag))
            }
            (State::Up, State::Down) => Some((State::Down, diag::RMT_DOWN)),
            _ => None,
        };
        if let Some((s, d)) = next {
            self.set_state(s, d, now);
            if (s, m.state) == (State::Down, State::Down) {
                self.log_msg(
                    vlog::Level::Info,
                    Some(m),
                    "Remote signaled STATE_DOWN",
                    now,
                );
            }
        }
        if self.cfg.forwarding_if_rx {
            self.demand_rx_bfd_time = now + 100 * self.cfg.min_rx;
        }
        Ok(())
    }

    /// The `bfd_status` column's pairs, in OVS's key order.
    pub fn status(&mut self, now: i64) -> Vec<(&'static str, String)> {
        vec![
            ("forwarding", self.forwarding(now).to_string()),
            ("state", self.state.name().into()),
            ("diagnostic", msg::diag_name(self.diag).into()),
            ("flap_count", self.flap_count.to_string()),
            ("remote_state", self.rmt_state.name().into()),
            ("remote_diagnostic", msg::diag_name(self.rmt_diag).into()),
        ]
    }

    /// `bfd/show`'s details of the session.
    pub fn details(&mut self, now: i64) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let fwd = self.forwarding(now);
        let _ = writeln!(s, "  Forwarding: {fwd}");
        let _ = writeln!(s, "  Detect Multiplier: {}", self.cfg.mult);
        let _ = writeln!(s, "  Concatenated Path Down: {}", self.cfg.cpath_down);
        let _ = writeln!(s, "  TX Interval: Approx {}ms", self.tx_interval());
        let _ = writeln!(s, "  RX Interval: Approx {}ms", self.rx_interval());
        let _ = writeln!(s, "  Detect Time: now {:+}ms", self.detect_time - now);
        let _ = writeln!(s, "  Next TX Time: now {:+}ms", self.next_tx - now);
        let _ = writeln!(s, "  Last TX Time: now {:+}ms", self.last_tx - now);
        s.push('\n');
        let _ = writeln!(s, "  Local Flags: {}", msg::flags_name(self.flags));
        let _ = writeln!(s, "  Local Session State: {}", self.state.name());
        let _ = writeln!(s, "  Local Diagnostic: {}", msg::diag_name(self.diag));
        let _ = writeln!(s, "  Local Discriminator: {:#x}", self.disc);
        let _ = writeln!(s, "  Local Minimum TX Interval: {}ms", self.local_min_tx());
        let _ = writeln!(s, "  Local Minimum RX Interval: {}ms", self.min_rx);
        s.push('\n');
        let _ = writeln!(s, "  Remote Flags: {}", msg::flags_name(self.rmt_flags));
        let _ = writeln!(s, "  Remote Session State: {}", self.rmt_state.name());
        let _ = writeln!(s, "  Remote Diagnostic: {}", msg::diag_name(self.rmt_diag));
        let _ = writeln!(s, "  Remote Discriminator: {:#x}", self.rmt_disc);
        let _ = writeln!(s, "  Remote Minimum TX Interval: {}ms", self.rmt_min_tx);
        let _ = writeln!(s, "  Remote Minimum RX Interval: {}ms", self.rmt_min_rx);
        let _ = writeln!(s, "  Remote Detect Multiplier: {}", self.rmt_mult);
        s
    }
}

impl Session {
    /// OVS's `log_msg()`: what happened, the packet's fields and the session's details, run
    /// together as OVS's are (just what happened without a packet).
    pub fn log_msg(&mut self, level: vlog::Level, m: Option<&Msg>, what: &str, now: i64) {
        let Some(module) = vlog::module("bfd") else {
            return;
        };
        if !module.enabled(level) {
            return;
        }
        let text = match m {
            Some(m) => {
                let details = self.details(now);
                format!(
                    "{}: {what}.{}{}",
                    self.name,
                    m.log_text(),
                    details.trim_end_matches('\n')
                )
            }
            None => format!("{}: {what}.", self.name),
        };
        module.log(level, &text);
    }

    /// A plain INFO line about the session.
    fn log_info(&self, text: &str) {
        if let Some(m) = vlog::module("bfd") {
            m.log(vlog::Level::Info, text);
        }
    }
}

/// OVS's INFO message of a state change: the change, then the session's details before it.
fn log_state_change(s: &mut Session, state: State, diag_: u8, now: i64) {
    let Some(m) = vlog::module("bfd") else {
        return;
    };
    if !m.enabled(vlog::Level::Info) {
        return;
    }
    let details = s.details(now);
    m.log(
        vlog::Level::Info,
        &format!(
            "{}: BFD state change: {}->{} \"{}\"->\"{}\".\n{}",
            s.name,
            s.state.name(),
            state.name(),
            msg::diag_name(s.diag),
            msg::diag_name(diag_),
            details.trim_end_matches('\n')
        ),
    );
}

#[cfg(test)]
mod tests;
