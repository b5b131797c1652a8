//! The event loop that serves a switch's OpenFlow connections: it polls every listener and
//! connection (`poll(2)`), accepts, connects and reconnects, drives each connection's
//! protocol ([`vconn`](super::vconn)), runs the inactivity probes, and hands whole messages to
//! the message layer's [`Handler`]; other threads queue messages (packet-ins) through a
//! [`LoopHandle`] and learn of connections coming and going from [`ConnEvent`]s.
//!
//! One loop runs on one control-plane thread. Nothing in it blocks: a connection that stalls
//! (a peer that stops reading, a controller that does not answer) costs its own queue, bounded,
//! and never delays the others. A request that takes long (a bundle commit) is worked out on
//! another thread while its connection is held ([`Handler::holds`], [`LoopHandle::release`]),
//! so that the other connections are served meanwhile and that connection's replies stay in
//! order.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::time::{Duration, Instant};

use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec};

use super::backoff::Backoff;
use super::handle::{Command, ConnEvent, LoopHandle, Waker, bind, snoop_options};
use super::socket::{self, Listener, Stream};
use super::vconn::{ConnError, Counters, Incoming, MsgKind, Vconn, io_text};
use super::{
    ConnId, ConnInfo, ConnOptions, ConnState, ConnStatus, Dest, Handler, ListenerId, Role, Target,
};
use crate::header::Version;
use crate::hello::VersionSet;

/// Connections accepted from one listener per loop iteration, so that a flood of them does
/// not starve the connections already open.
const ACCEPT_BURST: usize = 64;

/// Messages handled from one connection per loop iteration (as OVS's 50), for the same reason.
const RECV_BURST: usize = 50;

/// How long an accepted connection has to finish its hello exchange: as long as `rconn` gives
/// any connection in its CONNECTING state with no backoff behind it.
const HELLO_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a listener rests after an error accepting.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Events queued for a subscriber that does not read them before more are dropped.
const EVENT_QUEUE: usize = 1024;

/// What a connection's socket is doing.
#[derive(Debug)]
enum Link {
    /// An active connection waiting to try again.
    Backoff { until: Instant },
    /// An active connection whose TCP connect is in progress.
    Connecting { stream: Stream, deadline: Instant },
    /// Connected: exchanging hellos (`vconn.version()` is `None`) or messages. The hellos
    /// must be over by `deadline`.
    Open {
        stream: Stream,
        vconn: Box<Vconn>,
        deadline: Option<Instant>,
    },
}

/// A connection and what survives its reconnections.
#[derive(Debug)]
struct Conn {
    target: Target,
    role: Role,
    opts: ConnOptions,
    link: Link,
    /// When it entered its current state.
    since: Instant,
    /// Set for an active connection.
    backoff: Option<Backoff>,
    last_error: Option<ConnError>,
    /// Why the current link must end, found where it could not be ended at once (a write
    /// that failed); the next iteration ends it.
    doomed: Option<ConnError>,
    /// Counters of the links that ended.
    past: Counters,
    n_connects: u64,
    last_connected: Option<Instant>,
    last_disconnected: Option<Instant>,
    /// The snoopers watching this controller connection.
    monitors: Vec<ConnId>,
    /// The listener that accepted it.
    listener: Option<ListenerId>,
}

impl Conn {
    /// A connection in the state `link`; a primary one gets a backoff to reconnect with.
    fn new(target: Target, role: Role, opts: ConnOptions, link: Link, now: Instant) -> Conn {
        Conn {
            target,
            role,
            opts,
            link,
            since: now,
            backoff: (role == Role::Primary).then(|| Backoff::new(opts.max_backoff)),
            last_error: None,
            doomed: None,
            past: Counters::default(),
            n_connects: 0,
            last_connected: None,
            last_disconnected: None,
            monitors: Vec::new(),
            listener: None,
        }
    }

    /// The protocol state of a new link: its hello queued, copies kept if it is watched.
    fn vconn(&self, now: Instant) -> Box<Vconn> {
        let mut v = Vconn::new(
            self.opts.versions,
            self.opts.probe_interval,
            self.opts.async_queue,
            now,
        );
        v.set_mirror(!self.monitors.is_empty());
        Box::new(v)
    }

    fn state(&self) -> ConnState {
        match &self.link {
            Link::Backoff { .. } => ConnState::Backoff,
            Link::Connecting { .. } => ConnState::Connecting,
            Link::Open { vconn, .. } if vconn.version().is_none() => ConnState::Connecting,
            Link::Open { vconn, .. } if vconn.probing() => ConnState::Idle,
            Link::Open { .. } => ConnState::Active,
        }
    }

    fn info(&self, id: ConnId) -> Option<ConnInfo> {
        match &self.link {
            Link::Open { vconn, .. } => vconn.version().map(|version| ConnInfo {
                id,
                version,
                role: self.role,
                monitor_backlog: vconn.monitor_backlog(),
            }),
            _ => None,
        }
    }

    fn status(&self, id: ConnId, now: Instant) -> ConnStatus {
        let (version, now_counters, tx_queued) = match &self.link {
            Link::Open { vconn, .. } => (vconn.version(), vconn.counters(), vconn.tx_queued()),
            _ => (None, Counters::default(), 0),
        };
        ConnStatus {
            id,
            target: self.target.clone(),
            role: self.role,
            state: self.state(),
            state_elapsed: now.saturating_duration_since(self.since),
            version,
            last_error: self.last_error.clone(),
            counters: Counters {
                rx_msgs: self.past.rx_msgs + now_counters.rx_msgs,
                tx_msgs: self.past.tx_msgs + now_counters.tx_msgs,
                async_dropped: self.past.async_dropped + now_counters.async_dropped,
            },
            tx_queued,
            n_connects: self.n_connects,
            since_connect: self
                .last_connected
                .map(|t| now.saturating_duration_since(t)),
            since_disconnect: self
                .last_disconnected
                .map(|t| now.saturating_duration_since(t)),
        }
    }
}

/// A listener and the settings of what it accepts.
#[derive(Debug)]
struct ListenerEntry {
    listener: Listener,
    target: Target,
    opts: ConnOptions,
    /// Service or snoop.
    role: Role,
    /// After an error accepting (out of descriptors, most likely), the listener rests until
    /// then rather than wake every poll for a connection it cannot take.
    paused_until: Option<Instant>,
}

/// What a poll entry stands for.
#[derive(Clone, Copy, Debug)]
enum Slot {
    Waker,
    Listener(ListenerId),
    Conn(ConnId),
}

/// The loop: every listener and connection of a switch (or of a bridge).
#[derive(Debug)]
pub struct EventLoop {
    listeners: BTreeMap<ListenerId, ListenerEntry>,
    conns: BTreeMap<ConnId, Conn>,
    rx: Receiver<Command>,
    handle: LoopHandle,
    subscribers: Vec<SyncSender<ConnEvent>>,
    stopped: bool,
    /// The handler's reply buffer, reused.
    replies: Vec<u8>,
}

impl EventLoop {
    /// An empty loop.
    pub fn new() -> io::Result<EventLoop> {
        let fd = rustix::event::eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC)?;
        let (tx, rx) = mpsc::channel();
        Ok(EventLoop {
            listeners: BTreeMap::new(),
            conns: BTreeMap::new(),
            rx,
            handle: LoopHandle {
                tx,
                waker: Arc::new(Waker(fd)),
                ids: Arc::new(AtomicU64::new(0)),
            },
            subscribers: Vec::new(),
            stopped: false,
            replies: Vec::new(),
        })
    }

    /// A handle for other threads.
    pub fn handle(&self) -> LoopHandle {
        self.handle.clone()
    }

    /// Events of connections coming and going from now on. A subscriber that falls more than
    /// a thousand events behind misses the later ones; one that drops its receiver is forgotten.
    pub fn subscribe(&mut self) -> Receiver<ConnEvent> {
        let (tx, rx) = mpsc::sync_channel(EVENT_QUEUE);
        self.subscribers.push(tx);
        rx
    }

    fn id(&self) -> u64 {
        self.handle.id()
    }

    /// Listens on a passive target; what it accepts are service connections with `opts`. A
    /// `punix:` socket file is owner-only ([`PUNIX_MODE`](super::PUNIX_MODE)). Returns the
    /// listener and the target it is bound to (with the port a `ptcp:` of port 0 got).
    pub fn listen(
        &mut self,
        target: &Target,
        opts: ConnOptions,
    ) -> io::Result<(ListenerId, Target)> {
        self.listen_as(target, Role::Service, opts)
    }

    /// Listens on a passive target for snoopers ([`Role::Snoop`]), such as `BRIDGE.snoop`.
    pub fn listen_snoop(
        &mut self,
        target: &Target,
        versions: VersionSet,
    ) -> io::Result<(ListenerId, Target)> {
        self.listen_as(target, Role::Snoop, snoop_options(versions))
    }

    fn listen_as(
        &mut self,
        target: &Target,
        role: Role,
        opts: ConnOptions,
    ) -> io::Result<(ListenerId, Target)> {
        let (listener, bound) = bind(target)?;
        let id = ListenerId(self.id());
        self.add_listener(id, listener, bound.clone(), role, opts);
        Ok((id, bound))
    }

    fn add_listener(
        &mut self,
        id: ListenerId,
        listener: Listener,
        target: Target,
        role: Role,
        opts: ConnOptions,
    ) {
        let entry = ListenerEntry {
            listener,
            target,
            opts,
            role,
            paused_until: None,
        };
        self.listeners.insert(id, entry);
    }

    /// Stops listening (connections it accepted stay).
    pub fn close_listener(&mut self, id: ListenerId) {
        self.listeners.remove(&id);
    }

    /// Connects to a controller at an active target, now and again whenever the connection
    /// ends, until closed.
    pub fn connect(&mut self, target: Target, opts: ConnOptions) -> ConnId {
        let id = ConnId(self.id());
        self.add_controller(id, target, opts);
        id
    }

    fn add_controller(&mut self, id: ConnId, target: Target, opts: ConnOptions) {
        let now = Instant::now();
        let link = Link::Backoff { until: now };
        self.conns
            .insert(id, Conn::new(target, Role::Primary, opts, link, now));
    }

    /// Changes a connection's settings, as the database changes a controller's: the probe
    /// interval, queue and backoff apply at once; other allowed versions make the connection
    /// start again (a service connection is closed: its peer reconnects if it wants).
    pub fn configure(&mut self, id: ConnId, opts: ConnOptions, handler: &mut impl Handler) {
        let now = Instant::now();
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let versions_changed = c.opts.versions != opts.versions;
        c.opts = opts;
        if let Some(b) = c.backoff.as_mut() {
            let wait = b.set_max(opts.max_backoff);
            if let Link::Backoff { until } = &mut c.link {
                *until = (*until).min(now + wait);
            }
        }
        match &mut c.link {
            Link::Open { .. } if versions_changed => {
                self.link_down(id, ConnError::Reconfigured, now, handler);
            }
            Link::Open { vconn, .. } => vconn.set_limits(opts.probe_interval, opts.async_queue),
            Link::Backoff { .. } | Link::Connecting { .. } => {}
        }
    }

    /// Changes a listener's settings: for the connections it accepts from now on, and for
    /// those it accepted ([`EventLoop::configure`]).
    pub fn configure_listener(
        &mut self,
        id: ListenerId,
        opts: ConnOptions,
        handler: &mut impl Handler,
    ) {
        let Some(l) = self.listeners.get_mut(&id) else {
            return;
        };
        l.opts = opts;
        let accepted: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.listener == Some(id))
            .map(|(cid, _)| *cid)
            .collect();
        for cid in accepted {
            self.configure(cid, opts, handler);
        }
    }

    /// Closes a connection (an active one for good, with the snoopers that watch it).
    pub fn close(&mut self, id: ConnId, handler: &mut impl Handler) {
        if self.conns.contains_key(&id) {
            self.link_down(id, ConnError::Closed, Instant::now(), handler);
            if let Some(c) = self.conns.remove(&id) {
                for m in c.monitors {
                    self.close(m, handler);
                }
            }
        }
    }

    /// Every connection's status.
    pub fn status(&self) -> Vec<ConnStatus> {
        let now = Instant::now();
        self.conns
            .iter()
            .map(|(id, c)| c.status(*id, now))
            .collect()
    }

    /// The targets of the listeners.
    pub fn listeners(&self) -> Vec<(ListenerId, Target)> {
        self.listeners
            .iter()
            .map(|(id, l)| (*id, l.target.clone()))
            .collect()
    }

    /// Queues whole messages for `dest` from the loop's own thread (see [`LoopHandle::send`]).
    pub fn send(&mut self, dest: Dest, msg: Vec<u8>, kind: MsgKind) {
        let mut flush = Vec::new();
        match dest {
            Dest::Conn(id) => {
                if let Some(Link::Open { vconn, .. }) = self.conns.get_mut(&id).map(|c| &mut c.link)
                    && vconn.version().is_some()
                {
                    vconn.queue(msg, kind);
                    flush.push(id);
                }
            }
            Dest::All => {
                let version = msg.first().copied();
                for (id, c) in &mut self.conns {
                    if let Link::Open { vconn, .. } = &mut c.link
                        && c.role != Role::Snoop
                        && vconn.version().map(Version::wire) == version
                    {
                        vconn.queue(msg.clone(), kind);
                        flush.push(*id);
                    }
                }
            }
        }
        for id in flush {
            self.flush(id);
        }
    }

    /// The flow monitor updates waiting to be sent to connection `id`: (messages, bytes);
    /// `None` for a connection not open.
    pub fn monitor_backlog(&self, id: ConnId) -> Option<(usize, usize)> {
        match self.conns.get(&id).map(|c| &c.link) {
            Some(Link::Open { vconn, .. }) => Some(vconn.monitor_backlog()),
            _ => None,
        }
    }

    /// Runs until [`LoopHandle::stop`].
    pub fn run(&mut self, handler: &mut impl Handler) -> io::Result<()> {
        self.stopped = false;
        while !self.stopped {
            self.run_once(handler, None)?;
        }
        Ok(())
    }

    /// One iteration: commands, timers, then a poll of at most `max_wait` (unbounded: until
    /// something happens) and what it found.
    pub fn run_once(
        &mut self,
        handler: &mut impl Handler,
        max_wait: Option<Duration>,
    ) -> io::Result<()> {
        self.commands(handler);
        if self.stopped {
            return Ok(());
        }
        let now = Instant::now();
        let mut wake_at = self.run_timers(now, handler);
        if let Some(w) = max_wait {
            wake_at = Some(wake_at.map_or(now + w, |t| t.min(now + w)));
        }
        let ready = self.poll(wake_at)?;
        let now = Instant::now();
        for (slot, flags) in ready {
            match slot {
                Slot::Waker => self.handle.waker.drain(),
                Slot::Listener(id) => self.accept(id, now),
                Slot::Conn(id) => self.conn_ready(id, flags, now, handler),
            }
        }
        self.copy_to_snoopers();
        Ok(())
    }

    /// Sends the snoopers of each controller connection the copies it kept, as asynchronous
    /// messages (a snooper that does not keep up misses some), and forgets snoopers gone.
    fn copy_to_snoopers(&mut self) {
        let mut copies = Vec::new();
        for (id, c) in &mut self.conns {
            if c.monitors.is_empty() {
                continue;
            }
            if let Link::Open { vconn, .. } = &mut c.link
                && let Some(m) = vconn.take_mirrored()
            {
                copies.push((*id, m));
            }
        }
        for (id, m) in copies {
            let monitors = self.conns.get(&id).map(|c| c.monitors.clone());
            let mut alive = Vec::new();
            for s in monitors.into_iter().flatten() {
                let Some(snooper) = self.conns.get_mut(&s) else {
                    continue;
                };
                alive.push(s);
                if let Link::Open { vconn, .. } = &mut snooper.link
                    && vconn.version().is_some()
                {
                    vconn.queue(m.clone(), MsgKind::Async);
                    self.flush(s);
                }
            }
            if let Some(c) = self.conns.get_mut(&id) {
                if alive.is_empty()
                    && let Link::Open { vconn, .. } = &mut c.link
                {
                    vconn.set_mirror(false);
                }
                c.monitors = alive;
            }
        }
    }

    fn commands(&mut self, handler: &mut impl Handler) {
        loop {
            match self.rx.try_recv() {
                Ok(Command::Send { dest, msg, kind }) => self.send(dest, msg, kind),
                Ok(Command::Status(tx)) => {
                    let _ = tx.send(self.status());
                }
                Ok(Command::Listen {
                    id,
                    listener,
                    target,
                    role,
                    opts,
                }) => self.add_listener(id, listener, target, role, opts),
                Ok(Command::Connect { id, target, opts }) => self.add_controller(id, target, opts),
                Ok(Command::Configure(id, opts)) => self.configure(id, opts, handler),
                Ok(Command::ConfigureListener(id, opts)) => {
                    self.configure_listener(id, opts, handler);
                }
                Ok(Command::Close(id)) => self.close(id, handler),
                Ok(Command::CloseListener(id)) => self.close_listener(id),
                Ok(Command::Stop) => self.stopped = true,
                Ok(Command::Release { id, mut reply }) => {
                    handler.released(id, &mut reply);
                    self.release(id, reply);
                }
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return,
            }
        }
    }

    /// Backoffs that ended, connects and hellos that took too long, inactivity probes.
    /// Returns when the next timer is due.
    fn run_timers(&mut self, now: Instant, handler: &mut impl Handler) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut due = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        for l in self.listeners.values_mut() {
            match l.paused_until {
                Some(t) if t <= now => l.paused_until = None,
                Some(t) => due(t),
                None => {}
            }
        }
        // Attempts first, so that their deadlines count below.
        let reconnect: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| matches!(c.link, Link::Backoff { until } if until <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in reconnect {
            self.start_connect(id, now);
        }
        let mut failed = Vec::new();
        for (id, c) in &mut self.conns {
            if let Some(e) = c.doomed.take() {
                failed.push((*id, e));
                continue;
            }
            match &mut c.link {
                Link::Backoff { until } => due(*until),
                Link::Connecting { deadline, .. } if *deadline <= now => {
                    failed.push((*id, ConnError::ConnectTimeout));
                }
                Link::Connecting { deadline, .. } => due(*deadline),
                Link::Open {
                    vconn, deadline, ..
                } => {
                    if vconn.version().is_none()
                        && let Some(d) = *deadline
                    {
                        if d <= now {
                            failed.push((*id, ConnError::ConnectTimeout));
                            continue;
                        }
                        due(d);
                    }
                    match vconn.run_probe(now) {
                        Ok(t) => t.into_iter().for_each(&mut due),
                        Err(e) => failed.push((*id, e)),
                    }
                }
            }
        }
        for (id, e) in failed {
            if let Some(b) = self.conns.get_mut(&id).and_then(|c| c.backoff.as_mut())
                && e == ConnError::ConnectTimeout
            {
                b.failed();
            }
            self.link_down(id, e, now, handler);
        }
        // A probe may have queued an echo request; a connection that ended waits.
        let ids: Vec<ConnId> = self.conns.keys().copied().collect();
        for id in ids {
            self.flush(id);
            if let Some(Conn {
                link: Link::Backoff { until },
                ..
            }) = self.conns.get(&id)
            {
                due(*until);
            }
        }
        next
    }

    /// Starts an attempt of an active connection.
    fn start_connect(&mut self, id: ConnId, now: Instant) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let backoff = c
            .backoff
            .as_mut()
            .expect("only active connections reconnect");
        backoff.attempt(now);
        // Connecting and the hello exchange must end within the wait (at least 1 s), as
        // `rconn` has it.
        let wait = backoff.connect_timeout();
        match socket::connect(&c.target) {
            Ok((stream, true)) => {
                c.link = Link::Open {
                    stream,
                    vconn: c.vconn(now),
                    deadline: Some(now + wait),
                };
                c.since = now;
                self.flush(id);
            }
            Ok((stream, false)) => {
                c.link = Link::Connecting {
                    stream,
                    deadline: now + wait,
                };
                c.since = now;
            }
            Err(e) => {
                backoff.failed();
                let until = now + backoff.disconnected(now);
                c.last_error = Some(ConnError::ConnectFailed(io_text(&e)));
                c.link = Link::Backoff { until };
                c.since = now;
            }
        }
    }

    /// Polls every socket until something is ready or `wake_at`.
    fn poll(&self, wake_at: Option<Instant>) -> io::Result<Vec<(Slot, PollFlags)>> {
        let mut slots = Vec::with_capacity(1 + self.listeners.len() + self.conns.len());
        let mut fds = Vec::with_capacity(slots.capacity());
        slots.push(Slot::Waker);
        fds.push(PollFd::new(&self.handle.waker.0, PollFlags::IN));
        for (id, l) in &self.listeners {
            if l.paused_until.is_some() {
                continue;
            }
            slots.push(Slot::Listener(*id));
            fds.push(PollFd::new(&l.listener, PollFlags::IN));
        }
        // Connections with whole messages still buffered (left by a burst limit, or while too
        // many replies waited) are ready whatever the poll says.
        let mut buffered = Vec::new();
        for (id, c) in &self.conns {
            if let Link::Open { vconn, .. } = &c.link
                && vconn.may_read()
                && vconn.has_buffered()
            {
                buffered.push(*id);
            }
            let (fd, flags) = match &c.link {
                Link::Backoff { .. } => continue,
                Link::Connecting { stream, .. } => (stream.as_fd(), PollFlags::OUT),
                Link::Open { stream, vconn, .. } => {
                    let mut f = PollFlags::empty();
                    if vconn.may_read() {
                        f |= PollFlags::IN;
                    }
                    if vconn.wants_write() {
                        f |= PollFlags::OUT;
                    }
                    (stream.as_fd(), f)
                }
            };
            slots.push(Slot::Conn(*id));
            fds.push(PollFd::from_borrowed_fd(fd, flags));
        }
        let wake_at = if buffered.is_empty() {
            wake_at
        } else {
            Some(Instant::now())
        };
        let timeout = wake_at.map(|t| {
            let d = t.saturating_duration_since(Instant::now());
            // Round up, so that the timer is due when poll returns.
            Timespec::try_from(d + Duration::from_micros(999)).unwrap_or(Timespec {
                tv_sec: i64::MAX / 2,
                tv_nsec: 0,
            })
        });
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {
                return Ok(buffered
                    .into_iter()
                    .map(|id| (Slot::Conn(id), PollFlags::IN))
                    .collect());
            }
            Err(e) => return Err(e.into()),
        }
        Ok(slots
            .into_iter()
            .zip(fds)
            .map(|(s, f)| match s {
                // `buffered` is in id order, as the map.
                Slot::Conn(id) if buffered.binary_search(&id).is_ok() => {
                    (s, f.revents() | PollFlags::IN)
                }
                _ => (s, f.revents()),
            })
            .filter(|(_, f)| !f.is_empty())
            .collect())
    }

    fn accept(&mut self, id: ListenerId, now: Instant) {
        for _ in 0..ACCEPT_BURST {
            let Some(l) = self.listeners.get_mut(&id) else {
                return;
            };
            let stream = match l.listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                // A peer that left before it was accepted: the next may be fine.
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
                Err(_) => {
                    l.paused_until = Some(now + ACCEPT_PAUSE);
                    return;
                }
            };
            let (target, opts, role) = (l.target.clone(), l.opts, l.role);
            let cid = ConnId(self.id());
            if role == Role::Snoop {
                // A snooper watches the first controller connection; with none, there is
                // nothing to watch and it is closed, as OVS does.
                let Some(watched) = self.conns.values_mut().find(|c| c.role == Role::Primary)
                else {
                    continue;
                };
                watched.monitors.push(cid);
                if let Link::Open { vconn, .. } = &mut watched.link {
                    vconn.set_mirror(true);
                }
            }
            let placeholder = Link::Backoff { until: now };
            let mut c = Conn::new(target, role, opts, placeholder, now);
            c.listener = Some(id);
            c.link = Link::Open {
                stream,
                vconn: c.vconn(now),
                deadline: Some(now + HELLO_TIMEOUT),
            };
            self.conns.insert(cid, c);
            self.flush(cid);
        }
    }

    fn conn_ready(
        &mut self,
        id: ConnId,
        flags: PollFlags,
        now: Instant,
        handler: &mut impl Handler,
    ) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if let Some(e) = c.doomed.take() {
            self.link_down(id, e, now, handler);
            return;
        }
        match &mut c.link {
            Link::Backoff { .. } => {}
            Link::Connecting { stream, .. } => {
                if let Err(e) = stream.connect_result() {
                    if let Some(b) = c.backoff.as_mut() {
                        b.failed();
                    }
                    self.link_down(id, ConnError::ConnectFailed(io_text(&e)), now, handler);
                    return;
                }
                let Link::Connecting { stream, deadline } =
                    std::mem::replace(&mut c.link, Link::Backoff { until: now })
                else {
                    unreachable!("matched above")
                };
                c.link = Link::Open {
                    stream,
                    vconn: c.vconn(now),
                    deadline: Some(deadline),
                };
                self.flush(id);
            }
            Link::Open { vconn, .. } => {
                let may_read = vconn.may_read();
                let broken = flags.intersects(PollFlags::HUP | PollFlags::ERR);
                if may_read && (broken || flags.contains(PollFlags::IN)) {
                    if let Err(e) = self.receive(id, now, handler) {
                        self.link_down(id, e, now, handler);
                        return;
                    }
                } else if broken && !may_read {
                    // Gone, with replies it will never read.
                    self.link_down(id, ConnError::Eof, now, handler);
                    return;
                }
                self.flush(id);
            }
        }
    }

    /// Reads and handles what a connection sent, up to [`RECV_BURST`] messages.
    fn receive(
        &mut self,
        id: ConnId,
        now: Instant,
        handler: &mut impl Handler,
    ) -> Result<(), ConnError> {
        let mut handled = 0;
        while handled < RECV_BURST {
            let c = self
                .conns
                .get_mut(&id)
                .expect("receiving on a live connection");
            let Link::Open { stream, vconn, .. } = &mut c.link else {
                return Ok(());
            };
            if !vconn.may_read() {
                return Ok(());
            }
            match vconn.next_message(now)? {
                None => {
                    if !vconn.fill(stream)? {
                        return Ok(());
                    }
                }
                Some(Incoming::Connected(_)) if c.role == Role::Snoop => {
                    c.n_connects += 1;
                    c.since = now;
                    c.last_connected = Some(now);
                }
                // What a snooper says goes nowhere.
                Some(Incoming::Message(_)) if c.role == Role::Snoop => handled += 1,
                Some(Incoming::Connected(version)) => {
                    c.n_connects += 1;
                    c.since = now;
                    c.last_connected = Some(now);
                    let info = ConnInfo {
                        id,
                        version,
                        role: c.role,
                        monitor_backlog: (0, 0),
                    };
                    let event = ConnEvent::Connected {
                        id,
                        role: c.role,
                        version,
                        target: c.target.clone(),
                    };
                    handler.connected(&info);
                    self.publish(event);
                }
                Some(Incoming::Message(range)) => {
                    handled += 1;
                    let info = c.info(id).expect("messages come after the hello");
                    let Link::Open { vconn, .. } = &mut c.link else {
                        unreachable!("matched above")
                    };
                    self.replies.clear();
                    handler.handle(&info, vconn.message(range), &mut self.replies);
                    if !self.replies.is_empty() {
                        vconn.queue(std::mem::take(&mut self.replies), MsgKind::Reply);
                    }
                    if handler.holds(id) {
                        vconn.hold();
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    /// A held connection's reply is ready ([`LoopHandle::release`]): it is queued, and the
    /// connection's requests are read again (those already buffered on the next turn).
    fn release(&mut self, id: ConnId, reply: Vec<u8>) {
        let Some(Link::Open { vconn, .. }) = self.conns.get_mut(&id).map(|c| &mut c.link) else {
            return;
        };
        // A reconnected link was never held: the reply was for the link that ended.
        if !vconn.held() {
            return;
        }
        vconn.queue(reply, MsgKind::Reply);
        vconn.release(Instant::now());
        self.flush(id);
    }

    /// Writes what a connection has queued, as far as its socket takes it.
    fn flush(&mut self, id: ConnId) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let Link::Open { stream, vconn, .. } = &mut c.link else {
            return;
        };
        if !vconn.wants_write() {
            return;
        }
        if let Err(e) = vconn.write_to(stream) {
            // Ended by the next iteration: a shut down socket makes the poll return at once.
            c.doomed = Some(e);
            let _ = stream.shutdown();
        }
    }

    /// Ends a connection's current link: told to the handler and subscribers if it had
    /// connected; an active connection waits to try again, a service connection is gone.
    fn link_down(
        &mut self,
        id: ConnId,
        error: ConnError,
        now: Instant,
        handler: &mut impl Handler,
    ) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let old = std::mem::replace(&mut c.link, Link::Backoff { until: now });
        // As rconn: a connection, or an attempt under way, ended now.
        if !matches!(old, Link::Backoff { .. }) {
            c.last_disconnected = Some(now);
        }
        let mut was_connected = false;
        if let Link::Open {
            mut stream,
            mut vconn,
            ..
        } = old
        {
            // Last words, such as the hello failure's error: one try, the socket is closing.
            let _ = vconn.write_to(&mut stream);
            let k = vconn.counters();
            c.past.rx_msgs += k.rx_msgs;
            c.past.tx_msgs += k.tx_msgs;
            c.past.async_dropped += k.async_dropped;
            was_connected = vconn.version().is_some();
        }
        c.last_error = Some(error.clone());
        c.since = now;
        match c.backoff.as_mut() {
            Some(b) => {
                c.link = Link::Backoff {
                    until: now + b.disconnected(now),
                };
            }
            None => {
                self.conns.remove(&id);
            }
        }
        if was_connected {
            handler.disconnected(id);
            self.publish(ConnEvent::Disconnected { id, error });
        }
    }

    fn publish(&mut self, event: ConnEvent) {
        self.subscribers.retain(|s| {
            !matches!(
                s.try_send(event.clone()),
                Err(TrySendError::Disconnected(_))
            )
        });
    }
}
