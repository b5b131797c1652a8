//! Logging as Open vSwitch's `vlog` does it (`lib/vlog.c`, `ovs-appctl(8)` "VLOG
//! COMMANDS"): every message belongs to a named module (`dpif_netdev`, `ofproto_dpif_upcall`)
//! and has a level (`emer`, `err`, `warn`, `info`, `dbg`); each module has a level per
//! destination (`console`, `syslog`, `file`), and a message goes to the destinations whose
//! level admits it. `vlog/set`, `vlog/list` and `vlog/reopen` take and print OVS's syntax, so
//! operators' scripts and OVS's test suite (`vlog/set dpif_netdev:dbg`, then the log) work.
//!
//! Lines carry OVS's format: `2026-11-29T01:36:49.297Z|00059|dpif_netdev|DBG|message` in the
//! file (milliseconds), `2026-11-29T01:36:49Z|00059|dpif_netdev|DBG|message` on the console
//! (standard error). Syslog is accepted as a destination and its levels kept, but nothing is
//! sent to syslog.
//!
//! Whether a message would be logged is one relaxed atomic load ([`Module::enabled`]), so a
//! disabled debug message costs a caller on a hot path almost nothing; formatting happens only
//! when it is enabled.

#![forbid(unsafe_code)]

mod rate_limit;

pub use rate_limit::{Admit, RateLimit};

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A message's importance, most important first; a destination's level admits that level
/// and the ones above it. `Off` admits nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Logs nothing (a destination's level only).
    Off = 0,
    /// The switch cannot go on.
    Emer = 1,
    /// An error.
    Err = 2,
    /// Something unusual that may need attention.
    Warn = 3,
    /// Normal operation worth recording.
    Info = 4,
    /// Detail for debugging.
    Dbg = 5,
}

impl Level {
    const ALL: [Level; 6] = [
        Level::Off,
        Level::Emer,
        Level::Err,
        Level::Warn,
        Level::Info,
        Level::Dbg,
    ];

    /// OVS's name for the level (`dbg`, `info`...), as `vlog/set` takes it.
    pub fn name(self) -> &'static str {
        ["off", "emer", "err", "warn", "info", "dbg"][self as usize]
    }

    /// The level's name as a log line and `vlog/list` print it (`DBG`, `INFO`...).
    pub fn upper(self) -> &'static str {
        ["OFF", "EMER", "ERR", "WARN", "INFO", "DBG"][self as usize]
    }

    fn from_u8(v: u8) -> Level {
        Level::ALL[usize::from(v).min(5)]
    }

    fn parse(s: &str) -> Option<Level> {
        Level::ALL
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(s))
    }
}

/// Where messages go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dest {
    /// Standard error.
    Console = 0,
    /// The system log (levels kept; nothing is sent).
    Syslog = 1,
    /// The log file given with `--log-file`.
    File = 2,
}

impl Dest {
    const ALL: [Dest; 3] = [Dest::Console, Dest::Syslog, Dest::File];

    fn name(self) -> &'static str {
        ["console", "syslog", "file"][self as usize]
    }
}

/// A log module: a name and a level per destination.
pub struct Module {
    name: &'static str,
    levels: [AtomicU8; 3],
    /// The most detailed level any destination admits, for [`Module::enabled`].
    max: AtomicU8,
}

impl Module {
    const fn new(name: &'static str) -> Module {
        Module {
            name,
            levels: [
                AtomicU8::new(Level::Info as u8),
                AtomicU8::new(Level::Info as u8),
                AtomicU8::new(Level::Info as u8),
            ],
            max: AtomicU8::new(Level::Info as u8),
        }
    }

    /// The module's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether a message of `level` would go anywhere.
    #[inline]
    pub fn enabled(&self, level: Level) -> bool {
        level as u8 <= self.max.load(Ordering::Relaxed)
    }

    /// The level of destination `d`.
    pub fn level(&self, d: Dest) -> Level {
        Level::from_u8(self.levels[d as usize].load(Ordering::Relaxed))
    }

    fn set(&self, d: Dest, level: Level) {
        self.levels[d as usize].store(level as u8, Ordering::Relaxed);
        let max = self
            .levels
            .iter()
            .map(|l| l.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        self.max.store(max, Ordering::Relaxed);
    }

    /// Logs `msg` at `level` to the destinations that admit it.
    pub fn log(&self, level: Level, msg: &str) {
        if !self.enabled(level) {
            return;
        }
        let seq = SEQ.fetch_add(1, Ordering::Relaxed) + 1;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let stamp = utc(now.as_secs());
        if self.level(Dest::Console) >= level {
            // Never a panic, as eprintln! would give, when stderr cannot be written (a full
            // disk under a redirection, a closed pipe): the line is lost, the switch goes on.
            let _ = writeln!(
                std::io::stderr().lock(),
                "{stamp}Z|{seq:05}|{}|{}|{msg}",
                self.name,
                level.upper()
            );
        }
        if self.level(Dest::File) >= level {
            let ms = now.subsec_millis();
            let line = format!(
                "{stamp}.{ms:03}Z|{seq:05}|{}|{}|{msg}\n",
                self.name,
                level.upper()
            );
            let mut f = LOG_FILE.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((_, file)) = f.as_mut() {
                let _ = file.write_all(line.as_bytes());
            }
        }
    }
}

impl Module {
    /// Logs `msg` at `level` unless `rl` says the site has logged too much lately (OVS's
    /// `VLOG_*_RL`); after drops, OVS's summary of them goes first. A module at `dbg` level
    /// anywhere is not rate-limited, as in OVS.
    pub fn log_rl(&self, rl: &RateLimit, level: Level, msg: &str) {
        if !self.enabled(level) {
            return;
        }
        if self.max.load(Ordering::Relaxed) < Level::Dbg as u8 {
            match rl.admit(std::time::Instant::now()) {
                Admit::Drop => return,
                Admit::Log => {}
                Admit::LogAfterDrops(n, first, last) => self.log(
                    level,
                    &format!(
                        "Dropped {n} log messages in last {first} seconds (most recently, \
                         {last} seconds ago) due to excessive rate"
                    ),
                ),
            }
        }
        self.log(level, msg);
    }
}

/// The modules, in `vlog/list`'s (alphabetical) order.
pub static MODULES: [Module; 20] = [
    Module::new("bfd"),
    Module::new("bond"),
    Module::new("bridge"),
    Module::new("conntrack"),
    Module::new("daemon_unix"),
    Module::new("dpif"),
    Module::new("dpif_netdev"),
    Module::new("lacp"),
    Module::new("metrics"),
    Module::new("netdev"),
    Module::new("netdev_afxdp"),
    Module::new("netdev_dummy"),
    Module::new("netdev_linux"),
    Module::new("ofproto"),
    Module::new("ofproto_dpif"),
    Module::new("ofproto_dpif_upcall"),
    Module::new("ofproto_dpif_xlate"),
    Module::new("tunnel"),
    Module::new("unixctl"),
    Module::new("vlog"),
];

/// The module named `name`.
pub fn module(name: &str) -> Option<&'static Module> {
    MODULES.iter().find(|m| m.name == name)
}

/// Module `dpif_netdev` (the datapath: upcalls, PMD threads).
pub fn dpif_netdev() -> &'static Module {
    &MODULES[6]
}

static SEQ: AtomicU32 = AtomicU32::new(0);
static LOG_FILE: Mutex<Option<(PathBuf, File)>> = Mutex::new(None);

/// Sends the file destination's lines to `path` (appended; created if need be). As OVS's,
/// the old file (if any) gets `closing log file` and the new one `opened log file PATH`
/// (module `vlog`, level INFO), unless `path` is the file already open.
pub fn set_log_file(path: &Path) -> std::io::Result<()> {
    let f = OpenOptions::new().create(true).append(true).open(path)?;
    // Whether a file is open already, and if so, whether it is this one.
    let open = {
        let g = LOG_FILE.lock().unwrap_or_else(|e| e.into_inner());
        g.as_ref()
            .map(|(_, old)| same_file(old, &f).unwrap_or(false))
    };
    let vlog = module("vlog").expect("the vlog module exists");
    match open {
        Some(true) => return Ok(()),
        Some(false) => vlog.log(Level::Info, "closing log file"),
        None => {}
    }
    *LOG_FILE.lock().unwrap_or_else(|e| e.into_inner()) = Some((path.to_path_buf(), f));
    vlog.log(Level::Info, &format!("opened log file {}", path.display()));
    Ok(())
}

/// `vlog/reopen`: opens the log file again, by its name, so that logging goes on in a new
/// file after logrotate renamed the old one (Debian's logrotate script runs `ovs-appctl
/// vlog/reopen`).
pub fn reopen() -> Result<(), String> {
    let path = {
        let g = LOG_FILE.lock().unwrap_or_else(|e| e.into_inner());
        let Some((path, _)) = g.as_ref() else {
            return Err("Logging to file not configured".into());
        };
        path.clone()
    };
    set_log_file(&path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Whether two open files are one (same device and inode).
fn same_file(a: &File, b: &File) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let (a, b) = (a.metadata()?, b.metadata()?);
    Ok((a.dev(), a.ino()) == (b.dev(), b.ino()))
}

/// `vlog/set SPEC`: `SPEC` is words joined by `:`, each a module, a destination, a level or
/// `ANY`; a missing module means every module, a missing destination every destination, and a
/// missing level `dbg` (OVS's rules). All or nothing: an unknown word changes nothing.
pub fn set(spec: &str) -> Result<(), String> {
    let (mut modules, mut dests, mut level) = (None::<&Module>, None::<Dest>, None::<Level>);
    for word in spec.split(':') {
        if word.eq_ignore_ascii_case("any") {
            continue;
        }
        if let Some(d) = Dest::ALL
            .into_iter()
            .find(|d| d.name().eq_ignore_ascii_case(word))
        {
            dests = Some(d);
        } else if let Some(l) = Level::parse(word) {
            level = Some(l);
        } else if let Some(m) = module(word) {
            modules = Some(m);
        } else {
            return Err(format!("no destination, level, or module \"{word}\""));
        }
    }
    let level = level.unwrap_or(Level::Dbg);
    let targets: Vec<&Module> = match modules {
        Some(m) => vec![m],
        None => MODULES.iter().collect(),
    };
    for m in targets {
        for d in Dest::ALL {
            if dests.is_none_or(|x| x == d) {
                m.set(d, level);
            }
        }
    }
    Ok(())
}

/// `vlog/list`: every module's level per destination, in OVS's table.
pub fn list() -> String {
    let mut s = String::from(
        "                 console    syslog    file\n                 -------    ------    ------\n",
    );
    for m in &MODULES {
        let [c, y, f] = Dest::ALL.map(|d| m.level(d).upper());
        let _ = writeln!(s, "{:<16}  {c:>4}       {y:>4}       {f:>4}", m.name);
    }
    s
}

/// `YYYY-MM-DDTHH:MM:SS` of a Unix time (UTC), by the civil-from-days conversion of the
/// proleptic Gregorian calendar.
fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_stderr_cannot_take_is_lost_not_a_panic() {
        const TEST: &str = "tests::a_line_stderr_cannot_take_is_lost_not_a_panic";
        if std::env::var_os("FP_VLOG_CHILD").is_some() {
            MODULES[0].log(Level::Warn, "to a full disk");
            return;
        }
        let Ok(full) = OpenOptions::new().write(true).open("/dev/full") else {
            eprintln!("SKIP {TEST}: no /dev/full");
            return;
        };
        // The test binary again, this one test alone, its stderr a device that is always
        // full (as a log redirected to a full disk).
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
            .env("FP_VLOG_CHILD", "1")
            .stdout(std::process::Stdio::null())
            .stderr(full)
            .status()
            .unwrap();
        assert!(status.success(), "logging to a full stderr: {status}");
    }

    #[test]
    fn times_print_as_utc_calendar_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00");
        assert_eq!(utc(1_795_916_209), "2026-11-29T01:36:49");
    }

    // One test: the modules' levels are process-wide.
    #[test]
    fn set_and_list_take_and_print_ovs_s_syntax() {
        assert!(!dpif_netdev().enabled(Level::Dbg));
        set("dpif_netdev:file:dbg").unwrap();
        assert!(dpif_netdev().enabled(Level::Dbg));
        assert_eq!(dpif_netdev().level(Dest::Console), Level::Info);
        let l = list();
        assert!(l.starts_with("                 console    syslog    file\n"));
        assert!(
            l.contains("\ndpif_netdev       INFO       INFO        DBG\n"),
            "{l}"
        );
        assert!(
            l.contains("\nofproto_dpif_upcall  INFO       INFO       INFO\n"),
            "{l}"
        );
        assert_eq!(
            set("bogus:dbg").unwrap_err(),
            "no destination, level, or module \"bogus\""
        );
        set("ANY:console:off").unwrap();
        assert!(MODULES.iter().all(|m| m.level(Dest::Console) == Level::Off));
        set("info").unwrap();
        assert!(!dpif_netdev().enabled(Level::Dbg));
        assert_eq!(reopen().unwrap_err(), "Logging to file not configured");
        let path = std::env::temp_dir().join(format!("vlog-test-{}.log", std::process::id()));
        set_log_file(&path).unwrap();
        set("dpif_netdev:file:dbg").unwrap();
        dpif_netdev().log(Level::Dbg, "netdev@flowpath: miss upcall:\nin_port(1)");
        reopen().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let (stamp, rest) = text.split_once('|').unwrap();
        assert_eq!(stamp.len(), "2026-11-29T01:36:49.297Z".len(), "{text}");
        assert!(rest.ends_with("|dpif_netdev|DBG|netdev@flowpath: miss upcall:\nin_port(1)\n"));
    }
}
