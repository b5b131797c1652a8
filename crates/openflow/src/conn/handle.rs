//! What other threads use to reach a running [`EventLoop`]: a [`LoopHandle`] queues commands
//! (messages to send, listeners and controllers to add, change or close, status requests) on a
//! channel and wakes the loop with an eventfd; [`ConnEvent`]s tell of connections coming and
//! going.
//!
//! Listeners are bound and ids are given out by the caller's thread, so that it hears at once
//! of an address it cannot have and can refer to what it asked for before the loop has run.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::time::Duration;

#[cfg(doc)]
use super::EventLoop;
use super::socket::{Listener, PUNIX_MODE};
use super::vconn::{ConnError, MsgKind};
use super::{ConnId, ConnOptions, ConnStatus, Dest, ListenerId, Role, Target};
use crate::header::Version;
use crate::hello::VersionSet;

/// What a snooper's connection is: no probe (OVS's monitors have none), a queue of copies.
pub(super) fn snoop_options(versions: VersionSet) -> ConnOptions {
    ConnOptions {
        probe_interval: Duration::ZERO,
        ..ConnOptions::service(versions)
    }
}

/// A listener on `target` (a `punix:` socket file owner-only), and the target it is bound to.
pub(super) fn bind(target: &Target) -> io::Result<(Listener, Target)> {
    let listener = Listener::bind(target, PUNIX_MODE)?;
    let bound = listener.local_target()?;
    Ok((listener, bound))
}

/// How long [`LoopHandle::status`] waits for the loop to answer.
const STATUS_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection coming or going, for other threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnEvent {
    /// A connection finished its hello exchange.
    Connected {
        /// The connection.
        id: ConnId,
        /// Primary or service.
        role: Role,
        /// The negotiated version.
        version: Version,
        /// Its controller, or the listener that accepted it.
        target: Target,
    },
    /// A connection that had sent [`ConnEvent::Connected`] ended.
    Disconnected {
        /// The connection.
        id: ConnId,
        /// Why.
        error: ConnError,
    },
}

/// What other threads ask of the loop.
pub(super) enum Command {
    Send {
        dest: Dest,
        msg: Vec<u8>,
        kind: MsgKind,
    },
    Status(Sender<Vec<ConnStatus>>),
    Listen {
        id: ListenerId,
        listener: Listener,
        target: Target,
        role: Role,
        opts: ConnOptions,
    },
    Connect {
        id: ConnId,
        target: Target,
        opts: ConnOptions,
    },
    Configure(ConnId, ConnOptions),
    ConfigureListener(ListenerId, ConnOptions),
    Close(ConnId),
    CloseListener(ListenerId),
    Stop,
    Release {
        id: ConnId,
        reply: Vec<u8>,
    },
}

/// The eventfd that wakes the loop when a command is queued.
#[derive(Debug)]
pub(super) struct Waker(pub(super) OwnedFd);

impl Waker {
    pub(super) fn wake(&self) {
        // A full counter (2^64 - 2 wakes pending) already wakes the loop.
        let _ = rustix::io::write(&self.0, &1u64.to_ne_bytes());
    }

    pub(super) fn drain(&self) {
        let mut b = [0; 8];
        let _ = rustix::io::read(&self.0, &mut b);
    }
}

/// A way for other threads to reach a running [`EventLoop`].
#[derive(Clone, Debug)]
pub struct LoopHandle {
    pub(super) tx: Sender<Command>,
    pub(super) waker: Arc<Waker>,
    /// The last id given to a connection or listener.
    pub(super) ids: Arc<AtomicU64>,
}

impl LoopHandle {
    fn command(&self, c: Command) -> bool {
        let sent = self.tx.send(c).is_ok();
        self.waker.wake();
        sent
    }

    /// Queues whole messages (one or more, back to back) for `dest`. An asynchronous message
    /// is dropped, and counted, where the connection's queue of them is full. Returns false
    /// when the loop is gone.
    pub fn send(&self, dest: Dest, msg: Vec<u8>, kind: MsgKind) -> bool {
        self.command(Command::Send { dest, msg, kind })
    }

    /// Sends the reply (whole messages, back to back) of a request the [`Handler`](super::Handler)
    /// holds its connection for ([`Handler::holds`](super::Handler::holds)), and reads the
    /// connection's later requests again. Dropped if the connection ended meanwhile. Returns
    /// false when the loop is gone.
    pub fn release(&self, id: ConnId, reply: Vec<u8>) -> bool {
        self.command(Command::Release { id, reply })
    }

    pub(super) fn id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Listens on a passive target, as [`EventLoop::listen`]; the socket is bound here, so
    /// that the caller hears at once if it cannot be.
    pub fn listen(&self, target: &Target, opts: ConnOptions) -> io::Result<(ListenerId, Target)> {
        self.listen_as(target, Role::Service, opts)
    }

    /// Listens for snoopers, as [`EventLoop::listen_snoop`].
    pub fn listen_snoop(
        &self,
        target: &Target,
        versions: VersionSet,
    ) -> io::Result<(ListenerId, Target)> {
        self.listen_as(target, Role::Snoop, snoop_options(versions))
    }

    fn listen_as(
        &self,
        target: &Target,
        role: Role,
        opts: ConnOptions,
    ) -> io::Result<(ListenerId, Target)> {
        let (listener, bound) = bind(target)?;
        let id = ListenerId(self.id());
        self.command(Command::Listen {
            id,
            listener,
            target: bound.clone(),
            role,
            opts,
        });
        Ok((id, bound))
    }

    /// Connects to a controller, as [`EventLoop::connect`].
    pub fn connect(&self, target: Target, opts: ConnOptions) -> ConnId {
        let id = ConnId(self.id());
        self.command(Command::Connect { id, target, opts });
        id
    }

    /// Changes a connection's settings, as [`EventLoop::configure`].
    pub fn configure(&self, id: ConnId, opts: ConnOptions) -> bool {
        self.command(Command::Configure(id, opts))
    }

    /// Changes a listener's settings, as [`EventLoop::configure_listener`].
    pub fn configure_listener(&self, id: ListenerId, opts: ConnOptions) -> bool {
        self.command(Command::ConfigureListener(id, opts))
    }

    /// Closes a connection (an active one for good).
    pub fn close(&self, id: ConnId) -> bool {
        self.command(Command::Close(id))
    }

    /// Stops listening (connections it accepted stay).
    pub fn close_listener(&self, id: ListenerId) -> bool {
        self.command(Command::CloseListener(id))
    }

    /// Wakes the loop, so that [`EventLoop::run_once`] returns and its caller looks at what
    /// other threads left for it (packets for the controllers).
    pub fn wake(&self) {
        self.waker.wake();
    }

    /// Makes [`EventLoop::run`] return.
    pub fn stop(&self) -> bool {
        self.command(Command::Stop)
    }

    /// Every connection's status, as the loop answers it (`None` if it does not, within a few
    /// seconds). Not for the loop's own thread: there, use [`EventLoop::status`].
    pub fn status(&self) -> Option<Vec<ConnStatus>> {
        let (tx, rx) = mpsc::channel();
        if !self.command(Command::Status(tx)) {
            return None;
        }
        rx.recv_timeout(STATUS_TIMEOUT).ok()
    }
}
