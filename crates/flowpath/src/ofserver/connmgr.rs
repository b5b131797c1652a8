//! Controllers and fail modes, as `ovs-vswitchd`'s connection manager (`ofproto/connmgr.c`,
//! `ofproto/fail-open.c`) and the part of `vswitchd/bridge.c` that configures it: each bridge's
//! controller targets, allowed OpenFlow versions (`protocols`), fail mode and controller
//! options, shared between the control commands that change them ([`ControllerSettings`]) and
//! the OpenFlow server's thread that applies them ([`ConnMgr`]).
//!
//! OVS's rules, kept here:
//! - an active target (`tcp:`, `unix:`) is a primary connection (async messages, roles); a
//!   passive one (`ptcp:`, `punix:`) listens for service connections;
//! - `protocols` apply to every connection of the bridge, `BRIDGE.mgmt` included;
//! - `inactivity_probe` (ms; 5 s by default, 0: none, below 1 s: 1 s) and `max_backoff`
//!   (ms; 8 s by default) apply to the controllers;
//! - `unix:` and `punix:` targets are confined: `unix:` to the run directory, `punix:` to
//!   `RUNDIR/BRIDGE.*`; others are skipped with OVS's error;
//! - the flow table is flushed when a bridge gains its first controller or loses its last, and
//!   when the fail mode changes on a bridge without controllers; after a flush, a standalone
//!   bridge without controllers gets `priority=0 actions=NORMAL`; a secure one gets nothing;
//! - fail open: a standalone bridge with controllers, none of which has been connected and
//!   admitted (sent something beyond the handshake) for three times the longest probe interval,
//!   flushes its flows and switches every packet as NORMAL until one is admitted again.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ofproto::ofproto::Ofproto;
use openflow::conn::{
    ConnError, ConnId, ConnInfo, ConnOptions, ConnState, ConnStatus, EventLoop, Handler,
    ListenerId, Role, Target, TargetError,
};
use openflow::header::Version;
use openflow::hello::VersionSet;
use openflow::msgs::role::Role as OfRole;
use openflow::msgtype::OfpType;

use super::handler::OfHandler;

/// A bridge's fail mode (OVS's `fail_mode` column).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailMode {
    /// Switch as a learning bridge when there is no controller to decide.
    #[default]
    Standalone,
    /// Never switch on its own: what no flow matches is dropped (or sent to a controller).
    Secure,
}

impl FailMode {
    /// `standalone` or `secure`, with `ovs-vsctl`'s error otherwise.
    pub fn parse(s: &str) -> Result<FailMode, String> {
        match s {
            "standalone" => Ok(FailMode::Standalone),
            "secure" => Ok(FailMode::Secure),
            _ => Err("fail-mode must be \"standalone\" or \"secure\"".into()),
        }
    }

    /// The column's value.
    pub fn name(self) -> &'static str {
        match self {
            FailMode::Standalone => "standalone",
            FailMode::Secure => "secure",
        }
    }
}

/// One bridge's controller settings, as OVS's Bridge and Controller columns hold them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BridgeControl {
    /// Controller targets as written.
    pub controllers: Vec<String>,
    /// Allowed versions; empty: all.
    pub protocols: Vec<Version>,
    /// `None`: not set (standalone).
    pub fail_mode: Option<FailMode>,
    /// `inactivity_probe`, in milliseconds.
    pub inactivity_probe: Option<u64>,
    /// `max_backoff`, in milliseconds.
    pub max_backoff: Option<u64>,
}

/// A controller target as `ovs-vsctl set-controller` takes it: an unknown type gets its
/// warning as an error, a malformed address the reason.
pub fn check_target(target: &str) -> Result<(), String> {
    // Paths are checked against the run directory when the bridge applies them.
    match Target::parse(target, Path::new("/")) {
        Ok(_) => Ok(()),
        Err(TargetError::UnknownType(_)) => {
            Err(format!("target type \"{target}\" is possibly erroneous"))
        }
        Err(TargetError::OutsideRundir(..)) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// A `protocols` value, with the database's error otherwise.
pub fn parse_protocol(name: &str) -> Result<Version, String> {
    Version::ALL
        .into_iter()
        .find(|v| v.name() == name)
        .ok_or_else(|| {
            let all: Vec<&str> = Version::ALL.iter().map(|v| v.name()).collect();
            format!(
                "constraint violation: {name} is not one of the allowed values ([{}])",
                all.join(", ")
            )
        })
}

impl BridgeControl {
    /// The settings of a configuration file's bridge, checked.
    pub fn from_config(b: &crate::config::Bridge) -> Result<BridgeControl, String> {
        for t in &b.controller {
            check_target(t).map_err(|e| format!("controller: {e}"))?;
        }
        let protocols = b
            .protocols
            .iter()
            .map(|p| parse_protocol(p))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("protocols: {e}"))?;
        let fail_mode = b
            .fail_mode
            .as_deref()
            .map(FailMode::parse)
            .transpose()
            .map_err(|e| format!("fail-mode: {e}"))?;
        Ok(BridgeControl {
            controllers: b.controller.clone(),
            protocols,
            fail_mode,
            inactivity_probe: b.inactivity_probe,
            max_backoff: b.max_backoff,
        })
    }

    /// The versions its connections may use.
    pub fn versions(&self) -> VersionSet {
        if self.protocols.is_empty() {
            VersionSet::ALL
        } else {
            VersionSet::of(&self.protocols)
        }
    }

    /// The fail mode in force.
    pub fn fail_mode(&self) -> FailMode {
        self.fail_mode.unwrap_or_default()
    }

    /// Its controllers' connection settings, as `bridge.c` derives them.
    pub fn controller_options(&self) -> ConnOptions {
        let probe = match self.inactivity_probe {
            None => 5,
            Some(0) => 0,
            Some(ms) if ms < 1000 => 1,
            Some(ms) => ms / 1000,
        };
        ConnOptions {
            probe_interval: Duration::from_secs(probe),
            max_backoff: Duration::from_secs(self.max_backoff.map_or(8, |ms| ms / 1000)),
            ..ConnOptions::controller(self.versions())
        }
    }

    /// The targets the bridge uses, and the errors of those it skips (OVS's text).
    pub fn targets(&self, bridge: &str, rundir: &Path) -> (Vec<Target>, Vec<String>) {
        let mut ok = Vec::new();
        let mut skipped = Vec::new();
        // OVS's "none" stands for no controller.
        if self.controllers.len() == 1 && self.controllers[0] == "none" {
            return (ok, skipped);
        }
        for t in &self.controllers {
            match confine(t, bridge, rundir) {
                Ok(target) if !ok.contains(&target) => ok.push(target),
                Ok(_) => {}
                Err(e) => skipped.push(e),
            }
        }
        (ok, skipped)
    }

    /// Whether it has a primary controller (an active target it uses).
    pub fn has_controllers(&self, bridge: &str, rundir: &Path) -> bool {
        self.targets(bridge, rundir)
            .0
            .iter()
            .any(|t| !t.is_passive())
    }
}

/// `bridge.c`'s confinement of Unix-domain controllers: `unix:` within the run directory,
/// `punix:` only as `RUNDIR/BRIDGE.*`.
fn confine(target: &str, bridge: &str, rundir: &Path) -> Result<Target, String> {
    let dir = rundir.display().to_string();
    let dir = dir.trim_end_matches('/');
    let unix_refused = || {
        format!(
            "bridge {bridge}: Not connecting to socket controller \"{target}\" due to \
             possibility for remote exploit.  Instead, specify socket in permitted directory \
             \"unix:{dir}/\" or connect to \"unix:{dir}/{bridge}.mgmt\" (which is always \
             available without special configuration)."
        )
    };
    let punix_refused = || {
        format!(
            "bridge {bridge}: Not adding Unix domain socket controller \"{target}\" due to \
             possibility of overwriting local files. Instead, specify path in permitted format \
             \"punix:{dir}/{bridge}.*\" or connect to \"unix:{dir}/{bridge}.mgmt\" (which is \
             always available without special configuration)."
        )
    };
    if let Some(path) = target.strip_prefix("unix:") {
        if path.contains('/') && !same_prefix(path, &format!("{dir}/")) {
            return Err(unix_refused());
        }
        return Target::parse(target, rundir).map_err(|_| unix_refused());
    }
    if let Some(path) = target.strip_prefix("punix:") {
        let allowed = format!("{dir}/{bridge}.");
        if !same_prefix(path, &allowed) || path[allowed.len()..].contains('/') {
            return Err(punix_refused());
        }
        return Target::parse(target, rundir).map_err(|_| punix_refused());
    }
    Target::parse(target, rundir).map_err(|e| format!("bridge {bridge}: {e}"))
}

fn same_prefix(path: &str, prefix: &str) -> bool {
    path.len() >= prefix.len() && path.as_bytes()[..prefix.len()] == *prefix.as_bytes()
}

/// One controller's status, as `ovs-vsctl list controller` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerStatus {
    /// The target as configured.
    pub target: String,
    /// Whether a connection is up.
    pub is_connected: bool,
    /// `other`, `master` or `slave` while connected.
    pub role: Option<&'static str>,
    /// OVS's `status` map: `state`, `last_error`, `sec_since_connect`, `sec_since_disconnect`.
    pub status: BTreeMap<&'static str, String>,
}

/// What the control commands and the server share.
#[derive(Debug, Default)]
struct Shared {
    rundir: PathBuf,
    bridges: BTreeMap<String, BridgeControl>,
    /// What the server last saw, by bridge.
    status: BTreeMap<String, Vec<ControllerStatus>>,
    /// Bridges failing open.
    failing_open: BTreeMap<String, bool>,
}

/// Every bridge's controller settings: changed by the control commands, applied by the
/// OpenFlow server on its next turn (at most [`SYNC_INTERVAL`](super::SYNC_INTERVAL) later).
#[derive(Clone, Debug, Default)]
pub struct ControllerSettings(Arc<Mutex<Shared>>);

impl ControllerSettings {
    /// The settings of a switch whose run directory is `rundir`.
    pub fn new(rundir: &Path) -> ControllerSettings {
        ControllerSettings(Arc::new(Mutex::new(Shared {
            rundir: rundir.to_path_buf(),
            ..Shared::default()
        })))
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The switch's run directory.
    pub fn rundir(&self) -> PathBuf {
        self.lock().rundir.clone()
    }

    /// A bridge's settings (defaults for a bridge never set).
    pub fn get(&self, bridge: &str) -> BridgeControl {
        self.lock().bridges.get(bridge).cloned().unwrap_or_default()
    }

    /// Sets a bridge's settings at start-up, before the server runs: no flush.
    pub fn init(&self, bridge: &str, c: BridgeControl) {
        self.lock().bridges.insert(bridge.to_owned(), c);
    }

    /// Changes a bridge's settings at run time, as `ovs-vswitchd` reconfigures: the flow table
    /// is flushed as OVS flushes it (see the module's rules), then the server applies the rest.
    pub fn set(&self, of: &Ofproto, bridge: &str, new: BridgeControl) -> Result<(), String> {
        let mut s = self.lock();
        let old = s.bridges.get(bridge).cloned().unwrap_or_default();
        let had = old.has_controllers(bridge, &s.rundir);
        let has = new.has_controllers(bridge, &s.rundir);
        let flush = had != has || (old.fail_mode() != new.fail_mode() && !has);
        if flush {
            let failing_open = has && s.failing_open.get(bridge).copied().unwrap_or(false);
            flush_flows(of, bridge, &new, has, failing_open)?;
        }
        s.bridges.insert(bridge.to_owned(), new);
        Ok(())
    }

    /// Forgets a deleted bridge.
    pub fn remove(&self, bridge: &str) {
        let mut s = self.lock();
        s.bridges.remove(bridge);
        s.status.remove(bridge);
        s.failing_open.remove(bridge);
    }

    /// The status of a bridge's controllers, as the server last saw them.
    pub fn status(&self, bridge: &str) -> Vec<ControllerStatus> {
        self.lock().status.get(bridge).cloned().unwrap_or_default()
    }

    /// Whether the bridge is failing open.
    pub fn failing_open(&self, bridge: &str) -> bool {
        self.lock()
            .failing_open
            .get(bridge)
            .copied()
            .unwrap_or(false)
    }
}

/// `ofproto_flush_flows()` and what `connmgr_flushed()` adds back: every flow of the bridge
/// goes; a standalone bridge without controllers gets OVS's NORMAL flow.
fn flush_flows(
    of: &Ofproto,
    bridge: &str,
    c: &BridgeControl,
    has_controllers: bool,
    failing_open: bool,
) -> Result<(), String> {
    of.del_flows(bridge, None, false)?;
    if !has_controllers && c.fail_mode() == FailMode::Standalone {
        of.add_flow(bridge, crate::switch::DEFAULT_FLOW)?;
    }
    of.set_fail_open(bridge, failing_open)
}

/// A controller or passive target the server runs for a bridge.
#[derive(Debug)]
enum Running {
    Active(ConnId),
    Passive(ListenerId, Target),
}

/// What the server knows of one bridge's controllers.
#[derive(Debug, Default)]
struct BridgeConns {
    /// The settings applied.
    applied: BridgeControl,
    /// The targets in use.
    running: BTreeMap<String, Running>,
    /// The errors already logged for skipped targets.
    logged: Vec<String>,
    /// When the bridge's controllers were last all down and unadmitted, from when (OVS's
    /// `rconn_failure_duration()`, for the least failed one).
    failing_open: bool,
}

/// The server's side: applies the settings to the event loop and runs fail-open.
pub(crate) struct ConnMgr {
    settings: ControllerSettings,
    bridges: BTreeMap<String, BridgeConns>,
    /// When each primary connection was last connected and admitted (or created).
    admitted: HashMap<ConnId, Instant>,
}

impl ConnMgr {
    pub(crate) fn new(settings: ControllerSettings) -> ConnMgr {
        ConnMgr {
            settings,
            bridges: BTreeMap::new(),
            admitted: HashMap::new(),
        }
    }

    /// The options of a bridge's `.mgmt` listener.
    pub(crate) fn mgmt_options(&self, bridge: &str) -> ConnOptions {
        ConnOptions::service(self.settings.get(bridge).versions())
    }

    /// Brings a bridge's connections in line with its settings; `mgmt` is its `.mgmt`
    /// listener.
    pub(crate) fn sync_bridge(
        &mut self,
        ev: &mut EventLoop,
        h: &mut OfHandler,
        of: &Ofproto,
        bridge: &str,
        mgmt: Option<ListenerId>,
    ) {
        let want = self.settings.get(bridge);
        let rundir = self.settings.rundir();
        let bc = self.bridges.entry(bridge.to_owned()).or_default();
        let (targets, skipped) = want.targets(bridge, &rundir);
        for e in &skipped {
            if !bc.logged.contains(e) {
                log(vlog::Level::Err, e);
            }
        }
        bc.logged = skipped;
        let opts = want.controller_options();
        // Gone, or changed in a way that needs a new connection.
        let names: Vec<String> = targets.iter().map(ToString::to_string).collect();
        let gone: Vec<String> = bc
            .running
            .keys()
            .filter(|t| !names.contains(t))
            .cloned()
            .collect();
        for t in gone {
            if let Some(r) = bc.running.remove(&t) {
                log(
                    vlog::Level::Info,
                    &format!("{bridge}: removed controller \"{t}\""),
                );
                stop(ev, h, r, &mut self.admitted);
            }
        }
        let versions_changed = want.versions() != bc.applied.versions();
        if want.controller_options() != bc.applied.controller_options() {
            for r in bc.running.values() {
                match r {
                    Running::Active(id) => ev.configure(*id, opts, h),
                    Running::Passive(id, _) => ev.configure_listener(*id, opts, h),
                }
            }
        }
        if versions_changed && let Some(id) = mgmt {
            ev.configure_listener(id, ConnOptions::service(want.versions()), h);
        }
        for (t, name) in targets.into_iter().zip(names) {
            if bc.running.contains_key(&name) {
                continue;
            }
            if t.is_passive() {
                match ev.listen(&t, opts) {
                    Ok((id, bound)) => {
                        h.listener_bridge.insert(bound.clone(), bridge.to_owned());
                        bc.running.insert(name, Running::Passive(id, bound));
                    }
                    Err(e) => log(
                        vlog::Level::Err,
                        &format!("{bridge}: {name}: listen failed: {e}"),
                    ),
                }
            } else {
                let id = ev.connect(t, opts);
                h.controller_bridge.insert(id, bridge.to_owned());
                self.admitted.insert(id, Instant::now());
                bc.running.insert(name, Running::Active(id));
            }
        }
        bc.applied = want;
        self.fail_open_run(ev, h, of, bridge);
    }

    /// Forgets a deleted bridge's controllers.
    pub(crate) fn remove_bridge(&mut self, ev: &mut EventLoop, h: &mut OfHandler, bridge: &str) {
        if let Some(bc) = self.bridges.remove(bridge) {
            for (_, r) in bc.running {
                stop(ev, h, r, &mut self.admitted);
            }
        }
        self.settings.remove(bridge);
    }

    /// Notes a message from a connection: a primary one is admitted by anything beyond the
    /// handshake and configuration (OVS's `is_admitted_msg()`).
    pub(crate) fn note_message(&mut self, conn: &ConnInfo, msg: &[u8]) {
        if conn.role != Role::Primary {
            return;
        }
        let admitted = openflow::msgtype::decode_type(msg).is_ok_and(|t| {
            !matches!(
                t.kind(),
                OfpType::Hello
                    | OfpType::Error
                    | OfpType::EchoRequest
                    | OfpType::EchoReply
                    | OfpType::FeaturesRequest
                    | OfpType::FeaturesReply
                    | OfpType::GetConfigRequest
                    | OfpType::GetConfigReply
                    | OfpType::SetConfig
                    | OfpType::QueueGetConfigRequest
                    | OfpType::QueueGetConfigReply
                    | OfpType::GetAsyncRequest
                    | OfpType::GetAsyncReply
                    | OfpType::GroupStatsRequest
                    | OfpType::GroupStatsReply
                    | OfpType::GroupDescStatsRequest
                    | OfpType::GroupDescStatsReply
                    | OfpType::GroupFeaturesStatsRequest
                    | OfpType::GroupFeaturesStatsReply
                    | OfpType::TableFeaturesStatsRequest
                    | OfpType::TableFeaturesStatsReply
                    | OfpType::TableDescRequest
                    | OfpType::TableDescReply
            )
        });
        if admitted && let Some(t) = self.admitted.get_mut(&conn.id) {
            *t = Instant::now();
        }
    }

    /// Fail-open (`fail_open_run()`, `fail_open_maybe_recover()`), and the status published
    /// for the control commands.
    fn fail_open_run(&mut self, ev: &EventLoop, h: &OfHandler, of: &Ofproto, bridge: &str) {
        let Some(bc) = self.bridges.get_mut(bridge) else {
            return;
        };
        let now = Instant::now();
        let all = ev.status();
        let mut status = Vec::new();
        let mut failure: Option<Duration> = None;
        let mut probe = Duration::ZERO;
        for (name, r) in &bc.running {
            match r {
                Running::Active(id) => {
                    let Some(s) = all.iter().find(|s| s.id == *id) else {
                        continue;
                    };
                    let connected = s.version.is_some();
                    let since = self.admitted.get(id).copied().unwrap_or(now);
                    // Connected and admitted since it connected: no failure.
                    let ok = connected && s.since_connect.is_some_and(|c| now - c <= since);
                    let d = if ok { Duration::ZERO } else { now - since };
                    failure = Some(failure.map_or(d, |f| f.min(d)));
                    probe = probe.max(bc.applied.controller_options().probe_interval);
                    let role = h.conns.get(id).map_or(OfRole::Equal, |c| c.role);
                    status.push(controller_status(name, s, role));
                }
                // A listener has no connection of its own: OVS reports nothing for it.
                Running::Passive(..) => status.push(ControllerStatus {
                    target: name.clone(),
                    is_connected: false,
                    role: None,
                    status: BTreeMap::new(),
                }),
            }
        }
        let standalone = bc.applied.fail_mode() == FailMode::Standalone;
        let secs = failure.map_or(0, |d| d.as_secs());
        let trigger = probe.as_secs() * 3;
        let open = standalone && secs > 0 && secs >= trigger;
        if open && !bc.failing_open {
            log(
                vlog::Level::Warn,
                &format!(
                    "Could not connect to controller (or switch failed controller's \
                     post-connection admission control policy) for {secs} seconds, failing open"
                ),
            );
            bc.failing_open = true;
            if let Err(e) = flush_flows(of, bridge, &bc.applied, true, true) {
                log(vlog::Level::Warn, &format!("{bridge}: {e}"));
            }
        } else if bc.failing_open && (secs == 0 || !standalone || failure.is_none()) {
            log(vlog::Level::Warn, "No longer in fail-open mode");
            bc.failing_open = false;
            if let Err(e) = of.set_fail_open(bridge, false) {
                log(vlog::Level::Warn, &format!("{bridge}: {e}"));
            }
        }
        let mut s = self.settings.lock();
        s.status.insert(bridge.to_owned(), status);
        s.failing_open.insert(bridge.to_owned(), bc.failing_open);
    }
}

/// Closes a target's listener or connection, with what the listener accepted.
fn stop(
    ev: &mut EventLoop,
    h: &mut OfHandler,
    r: Running,
    admitted: &mut HashMap<ConnId, Instant>,
) {
    match r {
        Running::Active(id) => {
            ev.close(id, h);
            h.forget_conn(id);
            h.controller_bridge.remove(&id);
            admitted.remove(&id);
        }
        Running::Passive(id, bound) => {
            ev.close_listener(id);
            h.listener_bridge.remove(&bound);
            let accepted: Vec<ConnId> = ev
                .status()
                .into_iter()
                .filter(|s| s.target == bound && s.role == Role::Service)
                .map(|s| s.id)
                .collect();
            for c in accepted {
                ev.close(c, h);
                h.forget_conn(c);
            }
        }
    }
}

fn controller_status(target: &str, s: &ConnStatus, role: OfRole) -> ControllerStatus {
    let mut status = BTreeMap::new();
    status.insert("state", s.state.to_string());
    if let Some(e) = &s.last_error
        && s.state != ConnState::Active
    {
        // As rconn has it: the system's words for a failed connect.
        let text = match e {
            ConnError::ConnectFailed(why) => why.clone(),
            e => e.to_string(),
        };
        status.insert("last_error", text);
    }
    if let Some(d) = s.since_connect {
        status.insert("sec_since_connect", d.as_secs().to_string());
    }
    // Only once a connection was made: ovs-vswitchd learns a refused connect as it opens it,
    // before its rconn counts an attempt under way, so a target never reached has none.
    if let Some(d) = s.since_disconnect.filter(|_| s.n_connects > 0) {
        status.insert("sec_since_disconnect", d.as_secs().to_string());
    }
    ControllerStatus {
        target: target.to_owned(),
        is_connected: s.version.is_some(),
        role: s.version.map(|_| match role {
            OfRole::Primary => "master",
            OfRole::Secondary => "slave",
            _ => "other",
        }),
        status,
    }
}

fn log(level: vlog::Level, msg: &str) {
    if let Some(m) = vlog::module("bridge") {
        m.log(level, msg);
    }
}

/// The server's handler with the admission of primary connections noted on the way.
pub(crate) struct Admitting<'a> {
    pub(crate) handler: &'a mut OfHandler,
    pub(crate) connmgr: &'a mut ConnMgr,
}

impl Handler for Admitting<'_> {
    fn connected(&mut self, conn: &ConnInfo) {
        self.handler.connected(conn);
    }

    fn handle(&mut self, conn: &ConnInfo, msg: &[u8], replies: &mut Vec<u8>) {
        self.connmgr.note_message(conn, msg);
        self.handler.handle(conn, msg, replies);
    }

    fn disconnected(&mut self, conn: ConnId) {
        self.handler.disconnected(conn);
    }

    fn holds(&mut self, conn: ConnId) -> bool {
        self.handler.holds(conn)
    }

    fn released(&mut self, conn: ConnId, reply: &mut Vec<u8>) {
        self.handler.released(conn, reply);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_options_follow_bridge_c() {
        let mut c = BridgeControl::default();
        let o = c.controller_options();
        assert_eq!(o.probe_interval, Duration::from_secs(5));
        assert_eq!(o.max_backoff, Duration::from_secs(8));
        assert_eq!(o.versions, VersionSet::ALL);
        c.inactivity_probe = Some(0);
        assert_eq!(c.controller_options().probe_interval, Duration::ZERO);
        c.inactivity_probe = Some(300);
        assert_eq!(
            c.controller_options().probe_interval,
            Duration::from_secs(1)
        );
        c.inactivity_probe = Some(2500);
        c.max_backoff = Some(2000);
        assert_eq!(
            c.controller_options().probe_interval,
            Duration::from_secs(2)
        );
        assert_eq!(c.controller_options().max_backoff, Duration::from_secs(2));
        c.protocols = vec![Version::Of13];
        assert_eq!(c.versions(), VersionSet::of(&[Version::Of13]));
    }

    #[test]
    fn unix_targets_are_confined_as_bridge_c_confines_them() {
        let rundir = Path::new("/run/fp");
        let c = BridgeControl {
            controllers: vec![
                "unix:/run/fp/ctl.sock".into(),
                "unix:ctl2.sock".into(),
                "punix:/run/fp/br0.ctl".into(),
                "unix:/tmp/x.sock".into(),
                "punix:/run/fp/other.sock".into(),
                "punix:/run/fp/br0.x/y".into(),
                "punix:br0.rel".into(),
                "tcp:127.0.0.1:6653".into(),
            ],
            ..BridgeControl::default()
        };
        let (ok, skipped) = c.targets("br0", rundir);
        let ok: Vec<String> = ok.iter().map(ToString::to_string).collect();
        assert_eq!(
            ok,
            [
                "unix:/run/fp/ctl.sock",
                "unix:/run/fp/ctl2.sock",
                "punix:/run/fp/br0.ctl",
                "tcp:127.0.0.1:6653"
            ]
        );
        assert_eq!(skipped.len(), 4, "{skipped:?}");
        assert_eq!(
            skipped[0],
            "bridge br0: Not connecting to socket controller \"unix:/tmp/x.sock\" due to \
             possibility for remote exploit.  Instead, specify socket in permitted directory \
             \"unix:/run/fp/\" or connect to \"unix:/run/fp/br0.mgmt\" (which is always \
             available without special configuration)."
        );
        assert_eq!(
            skipped[1],
            "bridge br0: Not adding Unix domain socket controller \"punix:/run/fp/other.sock\" \
             due to possibility of overwriting local files. Instead, specify path in permitted \
             format \"punix:/run/fp/br0.*\" or connect to \"unix:/run/fp/br0.mgmt\" (which is \
             always available without special configuration)."
        );
        assert!(c.has_controllers("br0", rundir));
        let none = BridgeControl {
            controllers: vec!["none".into()],
            ..BridgeControl::default()
        };
        assert!(!none.has_controllers("br0", rundir));
        let passive = BridgeControl {
            controllers: vec!["ptcp:6653".into()],
            ..BridgeControl::default()
        };
        assert!(!passive.has_controllers("br0", rundir));
    }

    #[test]
    fn the_configuration_file_is_checked_with_the_same_words() {
        let errors = |bridge: &str| match crate::config::parse(&format!(
            "[[bridge]]\nname = \"b\"\n{bridge}\n"
        )) {
            Ok(_) => String::new(),
            Err(e) => e
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        };
        assert!(
            errors("fail-mode = \"open\"")
                .contains("bridge 'b': fail-mode: fail-mode must be \"standalone\" or \"secure\""),
            "{}",
            errors("fail-mode = \"open\"")
        );
        assert!(errors("protocols = [\"OpenFlow9\"]").contains("protocols: constraint violation"));
        assert!(
            errors("controller = [\"udp:1.2.3.4\"]")
                .contains("controller: target type \"udp:1.2.3.4\" is possibly erroneous")
        );
        assert_eq!(
            errors(
                "controller = [\"tcp:127.0.0.1\", \"punix:x\"]\nprotocols = [\"OpenFlow13\"]\n\
                 fail-mode = \"secure\"\ninactivity-probe = 0\nmax-backoff = 1000"
            ),
            ""
        );
    }

    #[test]
    fn bad_values_get_ovs_errors() {
        assert_eq!(
            check_target("udp:1.2.3.4"),
            Err("target type \"udp:1.2.3.4\" is possibly erroneous".into())
        );
        assert!(check_target("tcp:1.2.3.4:99999").is_err());
        assert!(check_target("tcp:127.0.0.1").is_ok());
        assert!(check_target("punix:/anywhere").is_ok());
        assert_eq!(
            parse_protocol("OpenFlow16"),
            Err(
                "constraint violation: OpenFlow16 is not one of the allowed values \
                 ([OpenFlow10, OpenFlow11, OpenFlow12, OpenFlow13, OpenFlow14, OpenFlow15])"
                    .into()
            )
        );
        assert_eq!(
            FailMode::parse("open"),
            Err("fail-mode must be \"standalone\" or \"secure\"".into())
        );
    }
}
