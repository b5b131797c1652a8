//! Bidirectional Forwarding Detection on the switch's interfaces (RFC 5880 asynchronous mode,
//! RFC 5881 single hop), as `ovs-vswitchd` runs it when an Interface's `bfd:enable` is true:
//! the sessions by interface, what the control plane sends when, what it received, and the
//! status (`bfd_status`, `bfd/show`). Translation recognises a session's packets on its port
//! ([`config::RxFilter`]) and sends them to the slow path; a port whose session does not
//! forward is not live ([`crate::port_config`]).

pub mod config;
pub mod frame;
pub mod msg;
pub mod session;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

pub use config::{Config, RxFilter};
pub use session::Session;

/// The `userspace` action cookie of the packets translation gives the BFD sessions.
pub const SLOW_PATH_COOKIE: &str = "slow_path(bfd)";

/// A session with where it runs.
struct Entry {
    bridge: String,
    ofport: u32,
    session: Session,
    /// The forwarding the port's liveness was last given.
    live: Option<bool>,
}

/// A control packet to send: the frame, out of port `ofport` of `bridge`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tx {
    pub bridge: String,
    pub ofport: u32,
    pub frame: Vec<u8>,
    /// Sent with the tunnel's OAM flag (`bfd:oam`).
    pub oam: bool,
}

/// Control packets refused, by reason (RFC 5880 section 6.8.6), for `bfd/show`'s readers and
/// the tests.
#[derive(Debug, Default)]
pub struct Refused {
    /// Not a well-formed control packet (short, bad version, length, multiplier...).
    pub malformed: AtomicU64,
    /// Well formed but not for the session (TTL, discriminator).
    pub ignored: AtomicU64,
    /// For a port without a session.
    pub no_session: AtomicU64,
}

/// Every session of the switch.
pub struct Sessions {
    by_name: Mutex<BTreeMap<String, Entry>>,
    /// Wakes the sender when a packet must go at once (a Final) or the sessions changed.
    wake: Condvar,
    epoch: Instant,
    rng: Mutex<u64>,
    next_udp_src: AtomicU64,
    pub refused: Refused,
}

impl Default for Sessions {
    fn default() -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id()) << 32;
        Sessions {
            by_name: Mutex::new(BTreeMap::new()),
            wake: Condvar::new(),
            epoch: Instant::now(),
            rng: Mutex::new(seed | 1),
            next_udp_src: AtomicU64::new(0),
            refused: Refused::default(),
        }
    }
}

impl Sessions {
    /// Milliseconds on the sessions' clock.
    pub fn now(&self) -> i64 {
        i64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(i64::MAX) + 1
    }

    fn random(&self) -> u32 {
        let mut r = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        // xorshift64
        *r ^= *r << 13;
        *r ^= *r >> 7;
        *r ^= *r << 17;
        (*r >> 16) as u32
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.by_name.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Configures interface `name` (port `ofport` of `bridge`): a session created, changed,
    /// or removed when `cfg` is `None`.
    pub fn configure(&self, name: &str, bridge: &str, ofport: u32, cfg: Option<Config>) {
        let now = self.now();
        let mut m = self.lock();
        let Some(cfg) = cfg else {
            m.remove(name);
            return;
        };
        if let Some(e) = m.get_mut(name) {
            if e.bridge != bridge || e.ofport != ofport {
                e.bridge = bridge.to_owned();
                e.ofport = ofport;
                e.live = None;
            }
            if e.session.cfg != cfg {
                e.session.configure(cfg, now);
            }
        } else {
            let disc = loop {
                let d = self.random();
                if d != 0 && m.values().all(|e| e.session.disc != d) {
                    break d;
                }
            };
            // RFC 5881: a source port in 49152-65535, one per session.
            let n = self.next_udp_src.fetch_add(1, Ordering::Relaxed) % 16384;
            let udp_src = 49152 + n as u16;
            let session = Session::new(name, disc, udp_src, cfg, now);
            m.insert(
                name.to_owned(),
                Entry {
                    bridge: bridge.to_owned(),
                    ofport,
                    session,
                    live: None,
                },
            );
        }
        self.wake.notify_all();
    }

    /// The interfaces that have a session: (interface, bridge, port).
    pub fn ports(&self) -> Vec<(String, String, u32)> {
        self.lock()
            .iter()
            .map(|(n, e)| (n.clone(), e.bridge.clone(), e.ofport))
            .collect()
    }

    /// A frame port `ofport` of `bridge` received that translation gave BFD: counted and
    /// ignored unless it is a control packet the port's session takes.
    pub fn receive(&self, bridge: &str, ofport: u32, frame: &[u8]) {
        let now = self.now();
        let Some((ttl, payload)) = frame::udp_payload(frame) else {
            self.refused.malformed.fetch_add(1, Ordering::Relaxed);
            crate::coverage::BFD_RX_MALFORMED.inc();
            return;
        };
        let mut m = self.lock();
        let Some(e) = m
            .values_mut()
            .find(|e| e.bridge == bridge && e.ofport == ofport)
        else {
            self.refused.no_session.fetch_add(1, Ordering::Relaxed);
            crate::coverage::BFD_RX_IGNORED.inc();
            return;
        };
        let msg = match msg::Msg::decode(payload) {
            Ok(msg) => msg,
            Err(r) => {
                self.refused.malformed.fetch_add(1, Ordering::Relaxed);
                crate::coverage::BFD_RX_MALFORMED.inc();
                // OVS says a short message at INFO, without its fields.
                let (level, m) = match r {
                    msg::Refusal::TooShort(_) => (vlog::Level::Info, None),
                    _ => (vlog::Level::Warn, msg::Msg::parse(payload).ok()),
                };
                e.session.log_msg(level, m.as_ref(), &r.to_string(), now);
                return;
            }
        };
        match e.session.receive(&msg, ttl, now) {
            Ok(()) if e.session.flags & msg::FLAG_FINAL != 0 => self.wake.notify_all(),
            Ok(()) => {}
            Err(why) => {
                self.refused.ignored.fetch_add(1, Ordering::Relaxed);
                crate::coverage::BFD_RX_IGNORED.inc();
                // OVS drops a TTL other than 255 silently.
                let level = if why == session::WRONG_TTL {
                    vlog::Level::Dbg
                } else {
                    vlog::Level::Warn
                };
                e.session.log_msg(level, Some(&msg), why, now);
            }
        }
    }

    /// Runs every session's timers and takes the control packets due; `rx_packets` gives an
    /// interface's received packets (`None`: it keeps no count), `port_mac` a port's Ethernet address (both called under
    /// the sessions' lock: they must take no lock). Returns them with the time of the next
    /// wake-up.
    pub fn run(
        &self,
        rx_packets: impl Fn(&str) -> Option<u64>,
        port_mac: impl Fn(&str, u32) -> flow::EthAddr,
    ) -> (Vec<Tx>, i64) {
        let now = self.now();
        let mut out = Vec::new();
        let mut m = self.lock();
        let mut wake = i64::MAX;
        for e in m.values_mut() {
            let s = &mut e.session;
            s.run(now, rx_packets(&s.name));
            if s.should_send(now) {
                let jitter = self.random();
                let msg = s.compose(now, jitter);
                let addrs = frame::Addrs {
                    eth_src: s
                        .cfg
                        .local_src_mac
                        .unwrap_or_else(|| port_mac(&e.bridge, e.ofport)),
                    eth_dst: s.cfg.local_dst_mac.unwrap_or(frame::DEFAULT_ETH_DST),
                    ip_src: s.cfg.src_ip,
                    ip_dst: s.cfg.dst_ip,
                    udp_src: s.udp_src,
                };
                out.push(Tx {
                    bridge: e.bridge.clone(),
                    ofport: e.ofport,
                    frame: frame::compose(&addrs, &msg),
                    oam: s.cfg.oam,
                });
            }
            wake = wake.min(s.wake_time());
        }
        (out, wake)
    }

    /// Waits until `until` (the sessions' clock) or until woken.
    pub fn wait(&self, until: i64, max: Duration) {
        let now = self.now();
        let ms = u64::try_from(until.saturating_sub(now)).unwrap_or(0);
        let d = Duration::from_millis(ms).min(max);
        if d.is_zero() {
            return;
        }
        let g = self.lock();
        let _ = self.wake.wait_timeout(g, d);
    }

    /// Wakes [`Sessions::wait`].
    pub fn notify(&self) {
        self.wake.notify_all();
    }

    /// The sessions whose forwarding differs from what their port's liveness was last given:
    /// (bridge, port, forwarding), each then recorded as given.
    pub fn liveness_changes(&self) -> Vec<(String, u32, bool)> {
        let now = self.now();
        let mut m = self.lock();
        let mut out = Vec::new();
        for e in m.values_mut() {
            let fwd = e.session.forwarding(now);
            if e.live != Some(fwd) {
                e.live = Some(fwd);
                out.push((e.bridge.clone(), e.ofport, fwd));
            }
        }
        out
    }

    /// Whether a session's status changed since [`Sessions::status`] last read it.
    pub fn status_changed(&self) -> bool {
        self.lock().values().any(|e| e.session.status_changed)
    }

    /// Interface `name`'s `bfd_status` pairs; `None` without a session.
    pub fn status(&self, name: &str) -> Option<Vec<(&'static str, String)>> {
        let now = self.now();
        let mut m = self.lock();
        let e = m.get_mut(name)?;
        e.session.status_changed = false;
        Some(e.session.status(now))
    }

    /// `bfd/show [IFACE]`.
    pub fn show(&self, name: Option<&str>) -> Result<String, String> {
        let now = self.now();
        let mut m = self.lock();
        match name {
            Some(n) => {
                let e = m.get_mut(n).ok_or("no such bfd object")?;
                Ok(e.session.details(now))
            }
            None => Ok(m
                .values_mut()
                .map(|e| {
                    let d = e.session.details(now);
                    format!("---- {} ----\n{d}", e.session.name)
                })
                .collect()),
        }
    }

    /// `bfd/set-forwarding [IFACE] normal|false|true`.
    pub fn set_forwarding(&self, name: Option<&str>, how: &str) -> Result<String, String> {
        let v = match how.to_ascii_lowercase().as_str() {
            "true" => Some(true),
            "false" => Some(false),
            "normal" => None,
            _ => return Err("unknown fault string".into()),
        };
        let mut m = self.lock();
        match name {
            Some(n) => {
                let e = m.get_mut(n).ok_or("no such BFD object")?;
                e.session.forwarding_override = v;
                e.session.status_changed = true;
            }
            None => {
                for e in m.values_mut() {
                    e.session.forwarding_override = v;
                    e.session.status_changed = true;
                }
            }
        }
        drop(m);
        self.wake.notify_all();
        Ok("OK".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enabled() -> Option<Config> {
        let m = [("enable".to_owned(), "true".to_owned())].into();
        Config::from_column(&m)
    }

    #[test]
    fn a_session_sends_at_once_then_counts_bad_input() {
        let s = Sessions::default();
        s.configure("t0", "br0", 3, enabled());
        let (tx, wake) = s.run(|_| Some(0), |_, _| flow::EthAddr([2, 0, 0, 0, 0, 9]));
        assert_eq!(tx.len(), 1);
        assert_eq!((tx[0].bridge.as_str(), tx[0].ofport), ("br0", 3));
        assert!(wake > s.now() + 500, "{wake}");
        let (ttl, p) = frame::udp_payload(&tx[0].frame).unwrap();
        assert_eq!(ttl, 255);
        let m = msg::Msg::decode(p).unwrap();
        assert_eq!(
            (m.state, m.min_tx_us, m.min_rx_us),
            (msg::State::Down, 1_000_000, 1_000_000)
        );
        let mut bad = tx[0].frame.clone();
        bad[42] = 0x40; // version 2
        s.receive("br0", 3, &bad);
        s.receive("br0", 3, &tx[0].frame[..50]);
        assert_eq!(s.refused.malformed.load(Ordering::Relaxed), 2);
        s.receive("br0", 4, &tx[0].frame);
        assert_eq!(s.refused.no_session.load(Ordering::Relaxed), 1);
        assert_eq!(s.show(Some("x")), Err("no such bfd object".into()));
        assert!(
            s.show(None)
                .unwrap()
                .starts_with("---- t0 ----\n  Forwarding: false\n")
        );
        assert_eq!(
            s.set_forwarding(None, "maybe"),
            Err("unknown fault string".into())
        );
        assert_eq!(s.set_forwarding(Some("t0"), "TRUE"), Ok("OK".into()));
        assert!(s.status_changed());
        assert_eq!(s.status("t0").unwrap()[0], ("forwarding", "true".into()));
        assert!(!s.status_changed());
        assert_eq!(s.liveness_changes(), vec![("br0".into(), 3, true)]);
        assert_eq!(s.liveness_changes(), vec![]);
        s.configure("t0", "br0", 3, None);
        assert_eq!(s.status("t0"), None);
    }
}
