//! OpenFlow connections: the transport and liveness layer that `ovs-vswitchd`'s `vconn`,
//! `rconn`, `pvconn` and connection manager provide, as a library the switch runs on its own
//! control-plane thread, never on a packet-processing one.
//!
//! - [`target`]: `tcp:`, `unix:`, `ptcp:`, `punix:` targets in OVS's syntax, confined to the
//!   run directory, and every bridge's `.mgmt` and `.snoop` listeners;
//! - [`socket`]: non-blocking streams and listeners;
//! - [`vconn`]: one connection's protocol: framing, hello negotiation, echo, the inactivity
//!   probe and the bounded transmit queue;
//! - [`rx_stream`]: a connection's receive path run over a byte stream without a socket;
//! - [`backoff`]: the reconnection waits of an active connection;
//! - [`event_loop`]: the loop that multiplexes listeners and connections and hands whole
//!   messages to a [`Handler`];
//! - [`handle`]: how other threads reach a running loop ([`LoopHandle`]) and hear of
//!   connections coming and going ([`ConnEvent`]).
//!
//! Roles follow OVS: a connection the switch opens to a controller is [`Role::Primary`]
//! (`OFCONN_PRIMARY`), one accepted on a listener is [`Role::Service`] (`OFCONN_SERVICE`); the
//! message layer applies the asynchronous-message rules that depend on it. A connection to a
//! snoop listener ([`Role::Snoop`]) watches the first controller connection, as in OVS.

pub mod backoff;
pub mod event_loop;
pub mod handle;
pub mod rx_stream;
pub mod socket;
pub mod target;
pub mod vconn;

use std::fmt;
use std::time::Duration;

pub use backoff::DEFAULT_MAX_BACKOFF;
pub use event_loop::EventLoop;
pub use handle::{ConnEvent, LoopHandle};
pub use socket::PUNIX_MODE;
pub use target::{OFP_PORT, Target, TargetError, bridge_targets};
pub use vconn::{
    ConnError, Counters, DEFAULT_ASYNC_QUEUE, MsgKind, RCONN_OVERFLOW, RCONN_QUEUED, RCONN_SENT,
    REPLY_MAX,
};

use crate::header::Version;
use crate::hello::VersionSet;

/// A connection, for as long as the loop knows it (an active one keeps its id across
/// reconnections).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// A listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ListenerId(pub u64);

/// How a connection came to be, which decides the asynchronous messages it gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// An active connection to a controller (`OFCONN_PRIMARY`).
    Primary,
    /// A connection accepted on a listener (`OFCONN_SERVICE`): `ovs-ofctl`, `ovn-controller`.
    Service,
    /// A connection accepted on a snoop listener (`BRIDGE.snoop`, for `ovs-ofctl snoop`): it
    /// is sent a copy of every message a controller connection exchanges after its hello;
    /// neither it nor what it sends reaches the message layer or [`ConnEvent`]s.
    Snoop,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Primary => "primary",
            Role::Service => "service",
            Role::Snoop => "snoop",
        })
    }
}

/// Where a connection is in its life, with `rconn`'s state names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConnState {
    /// Waiting before the next attempt to connect.
    Backoff,
    /// Connecting, or exchanging hellos.
    Connecting,
    /// Connected; the peer has been heard from within the probe interval.
    Active,
    /// Connected; an inactivity probe waits for an answer.
    Idle,
}

impl fmt::Display for ConnState {
    /// As OVS's `Controller` status column has it: `ACTIVE`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConnState::Backoff => "BACKOFF",
            ConnState::Connecting => "CONNECTING",
            ConnState::Active => "ACTIVE",
            ConnState::Idle => "IDLE",
        })
    }
}

/// Settings of a connection, or of the connections a listener accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnOptions {
    /// The versions the bridge allows.
    pub versions: VersionSet,
    /// Silence after which an echo request goes out, and after which, again, the connection
    /// is dropped; zero turns the probe off. (OVS raises a configured interval below 5 s to
    /// 5 s; that is the configuration's rule, not this layer's.)
    pub probe_interval: Duration,
    /// The longest wait between attempts of an active connection.
    pub max_backoff: Duration,
    /// Asynchronous messages queued before more are dropped.
    pub async_queue: usize,
}

impl ConnOptions {
    /// OVS's defaults for a controller: probe after 5 s, backoff up to 8 s.
    pub fn controller(versions: VersionSet) -> ConnOptions {
        ConnOptions {
            versions,
            probe_interval: Duration::from_secs(5),
            max_backoff: DEFAULT_MAX_BACKOFF,
            async_queue: DEFAULT_ASYNC_QUEUE,
        }
    }

    /// OVS's defaults for a service listener such as `BRIDGE.mgmt`: probe after 60 s.
    pub fn service(versions: VersionSet) -> ConnOptions {
        ConnOptions {
            probe_interval: Duration::from_secs(60),
            ..ConnOptions::controller(versions)
        }
    }
}

/// What the message layer is told of the connection a message came on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnInfo {
    /// The connection.
    pub id: ConnId,
    /// The version negotiated with the peer: every message it sends the handler is of it.
    pub version: Version,
    /// Primary or service.
    pub role: Role,
    /// Flow monitor updates still waiting to be sent to it when the message was read:
    /// (messages, bytes) ([`MsgKind::Monitor`]).
    pub monitor_backlog: (usize, usize),
}

/// The message layer, run by the [`EventLoop`] on its thread.
///
/// The loop answers hellos and echo requests, refuses messages of another version and keeps
/// connections alive; every other whole message reaches [`Handler::handle`]. A handler that
/// must reach other connections (a port-status for all, a connection to close) keeps a
/// [`LoopHandle`]: what it queues there is done on the loop's next turn, right after the
/// messages at hand.
pub trait Handler {
    /// A connection finished its hello exchange.
    fn connected(&mut self, conn: &ConnInfo) {
        let _ = conn;
    }

    /// One whole message (header included) from `conn`; replies are appended to `replies`
    /// as whole messages, back to back, and sent in order. Replies are never dropped.
    fn handle(&mut self, conn: &ConnInfo, msg: &[u8], replies: &mut Vec<u8>);

    /// A connection that had finished its hello exchange ended.
    fn disconnected(&mut self, conn: ConnId) {
        let _ = conn;
    }

    /// Asked after each [`Handler::handle`]: whether the reply to the message just handled
    /// on `conn` is being worked out on another thread (a long bundle commit), to be sent by
    /// [`LoopHandle::release`]. Until then the loop holds the connection: it reads nothing
    /// more from it, so that its later requests are answered after that reply (a
    /// connection's replies stay in order, as OVS's), while the other connections are
    /// served as usual.
    fn holds(&mut self, conn: ConnId) -> bool {
        let _ = conn;
        false
    }

    /// The reply of a held connection is about to go out ([`LoopHandle::release`]): what the
    /// handler must send before it goes in front of `reply`.
    fn released(&mut self, conn: ConnId, reply: &mut Vec<u8>) {
        let _ = (conn, reply);
    }
}

/// A handler that answers nothing: connections get only what the layer answers itself.
impl Handler for () {
    fn handle(&mut self, _: &ConnInfo, _: &[u8], _: &mut Vec<u8>) {}
}

/// Where a message from another thread goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dest {
    /// One connection.
    Conn(ConnId),
    /// Every connection that negotiated the message's version (its header's first byte),
    /// snoopers aside.
    All,
}

/// A connection's status, for `ovs-appctl`-style show commands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnStatus {
    /// The connection.
    pub id: ConnId,
    /// The controller it connects to, or the listener it was accepted on.
    pub target: Target,
    /// Primary or service.
    pub role: Role,
    /// Where it is in its life.
    pub state: ConnState,
    /// How long it has been in that state.
    pub state_elapsed: Duration,
    /// The negotiated version, while connected.
    pub version: Option<Version>,
    /// Why the last connection (of an active target) ended or failed.
    pub last_error: Option<ConnError>,
    /// Messages received, sent and dropped, over every connection of the target.
    pub counters: Counters,
    /// Messages waiting to be sent.
    pub tx_queued: usize,
    /// Times the connection was made (hello exchange completed).
    pub n_connects: u64,
    /// Since the connection was last made (OVS's `sec_since_connect`).
    pub since_connect: Option<Duration>,
    /// Since a connection of the target last ended (OVS's `sec_since_disconnect`).
    pub since_disconnect: Option<Duration>,
}
