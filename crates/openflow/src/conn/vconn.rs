//! One OpenFlow connection's protocol, apart from its socket (OVS's `vconn` with the liveness
//! and queueing of its `rconn`): the framing of the byte stream into messages, the hello
//! exchange, echo requests answered here, messages of the wrong version refused, the
//! inactivity probe, and the bounded transmit queue.
//!
//! The machine does no I/O of its own: it reads from and writes to whatever `Read`/`Write` it
//! is handed and is told the time, so the event loop drives it over non-blocking sockets and
//! tests drive it over byte buffers.
//!
//! Only what the peer sends counts as a sign of life for the probe: as with OVS, a switch
//! that keeps sending (packet-ins) to a peer that says nothing still probes it.
//!
//! Memory stays bounded whatever the peer does: at most one incomplete message (64 KiB) and one
//! read's worth of bytes are buffered on input; on output, asynchronous messages (packet-ins
//! and the like) beyond a limit are dropped and counted, and while [`REPLY_MAX`] replies wait
//! for the peer to read them no further request is read, so a peer that stops reading stops
//! being served instead of growing the queue, as `ovs-vswitchd` does.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::ops::Range;
use std::time::{Duration, Instant};

use crate::error::{self, OfpErr};
use crate::header::{
    self, FramingError, Header, OFPT_ECHO_REPLY, OFPT_ECHO_REQUEST, OFPT_ERROR, OFPT_HELLO, Version,
};
use crate::hello::{self, Incompatible, VersionSet};

/// OpenFlow messages queued for sending, on every connection (OVS's `rconn_queued`;
/// `coverage/show`).
pub static RCONN_QUEUED: ofproto::coverage::Counter =
    ofproto::coverage::Counter::new("rconn_queued");
/// Asynchronous OpenFlow messages (packet-ins, flow-removed, port-status) dropped because
/// their connection's queue was full: a controller that does not keep up (OVS's
/// `rconn_overflow`).
pub static RCONN_OVERFLOW: ofproto::coverage::Counter =
    ofproto::coverage::Counter::new("rconn_overflow");
/// OpenFlow messages written out whole, on every connection (OVS's `rconn_sent`).
pub static RCONN_SENT: ofproto::coverage::Counter = ofproto::coverage::Counter::new("rconn_sent");

/// Replies queued on a connection beyond which its requests are no longer read
/// (`OFCONN_REPLY_MAX` in OVS).
pub const REPLY_MAX: usize = 100;

/// Asynchronous messages a connection queues by default before dropping more (OVS's
/// `controller_queue_size` default).
pub const DEFAULT_ASYNC_QUEUE: usize = 100;

/// Bytes read from a socket at a time.
const READ_CHUNK: usize = 16 * 1024;

/// How a queued message fares when the peer does not read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsgKind {
    /// A reply to a request, or anything else that must not be lost: always queued (the
    /// connection stops reading requests while too many wait).
    Reply,
    /// An asynchronous message (packet-in, port-status, flow-removed...): dropped and counted
    /// when the connection's asynchronous queue is full.
    Async,
    /// A flow monitor's update: never dropped, nor does it stop the connection's reading;
    /// counted apart (`Vconn::monitor_backlog`) so that the switch pauses the connection's
    /// monitors when too many bytes of them wait (OVS's `monitor_counter`).
    Monitor,
}

/// Why a connection ended.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnError {
    /// The peer closed the connection.
    #[error("connection closed by peer")]
    Eof,
    /// A socket error.
    #[error("{0}")]
    Io(String),
    /// A header whose length cannot be right: the stream is not OpenFlow.
    #[error("{0}")]
    Framing(#[from] FramingError),
    /// The first message was not a hello.
    #[error("received message type {msg_type} (version 0x{version:02x}) while expecting hello")]
    NotHello {
        /// The message's type.
        msg_type: u8,
        /// The message's version.
        version: u8,
    },
    /// No version in common with the peer.
    #[error("version negotiation failed (we support {}, peer supports {})", .0.ours, .0.theirs)]
    Incompatible(Incompatible),
    /// The peer did not answer the inactivity probe.
    #[error("no response to inactivity probe after {} seconds, disconnecting", .0.as_secs_f64())]
    ProbeTimeout(Duration),
    /// An active connection did not complete (connect and hello) in time.
    #[error("connection timed out")]
    ConnectTimeout,
    /// The connection could not be opened.
    #[error("connection failed ({0})")]
    ConnectFailed(String),
    /// The switch closed the connection.
    #[error("closed by the switch")]
    Closed,
    /// The allowed versions changed: the connection is made again to negotiate anew.
    #[error("allowed versions changed")]
    Reconfigured,
}

impl From<io::Error> for ConnError {
    fn from(e: io::Error) -> Self {
        ConnError::Io(io_text(&e))
    }
}

/// A socket error as OVS words it: the system's text alone (`Connection refused`), without
/// Rust's `(os error 111)`.
pub(crate) fn io_text(e: &io::Error) -> String {
    let text = e.to_string();
    match e.raw_os_error() {
        Some(n) => text
            .strip_suffix(&format!(" (os error {n})"))
            .map_or(text.clone(), str::to_string),
        None => text,
    }
}

/// What the machine made of the bytes it has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Incoming {
    /// The hello exchange ended: the connection speaks `Version` from now on.
    Connected(Version),
    /// A message for the message layer: [`Vconn::message`] of the range, until the next
    /// [`Vconn::fill`].
    Message(Range<usize>),
}

/// Counters of a connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Messages received.
    pub rx_msgs: u64,
    /// Messages sent.
    pub tx_msgs: u64,
    /// Asynchronous messages dropped because the peer was not reading.
    pub async_dropped: u64,
}

/// One queued send: one or more whole messages.
#[derive(Debug)]
struct Queued {
    bytes: Vec<u8>,
    kind: MsgKind,
    n_msgs: usize,
}

/// The protocol state of one connection.
#[derive(Debug)]
pub(crate) struct Vconn {
    allowed: VersionSet,
    version: Option<Version>,
    rx: Vec<u8>,
    /// Where the unparsed bytes of `rx` start.
    rx_start: usize,
    txq: VecDeque<Queued>,
    /// Bytes of the first queued send already written.
    tx_head: usize,
    replies_queued: usize,
    async_queued: usize,
    /// Flow monitor updates waiting, and their bytes.
    monitor_queued: usize,
    monitor_bytes: usize,
    async_limit: usize,
    probe_interval: Duration,
    last_activity: Instant,
    /// When the inactivity probe went out, while it waits for an answer.
    probe_sent: Option<Instant>,
    next_xid: u32,
    counters: Counters,
    /// Copies of the messages exchanged after the hello, for snoopers, while they are wanted.
    mirror: Option<Vec<u8>>,
    /// Whether the reply to a request is being worked out elsewhere ([`Vconn::hold`]).
    held: bool,
}

impl Vconn {
    /// A new connection that allows `allowed` (not empty), with its hello queued. A
    /// `probe_interval` of zero turns the inactivity probe off.
    pub(crate) fn new(
        allowed: VersionSet,
        probe_interval: Duration,
        async_limit: usize,
        now: Instant,
    ) -> Vconn {
        let mut v = Vconn {
            allowed,
            version: None,
            rx: Vec::new(),
            rx_start: 0,
            txq: VecDeque::new(),
            tx_head: 0,
            replies_queued: 0,
            async_queued: 0,
            monitor_queued: 0,
            monitor_bytes: 0,
            async_limit,
            probe_interval,
            last_activity: now,
            probe_sent: None,
            next_xid: 1,
            counters: Counters::default(),
            mirror: None,
            held: false,
        };
        let mut h = Vec::with_capacity(16);
        hello::encode(allowed, v.xid(), &mut h);
        v.queue(h, MsgKind::Reply);
        v
    }

    fn xid(&mut self) -> u32 {
        let x = self.next_xid;
        self.next_xid = self.next_xid.wrapping_add(1);
        x
    }

    /// Changes the probe interval and the asynchronous queue's limit (what is queued stays).
    pub(crate) fn set_limits(&mut self, probe_interval: Duration, async_limit: usize) {
        self.probe_interval = probe_interval;
        self.async_limit = async_limit;
    }

    /// The negotiated version, once the hello exchange is over.
    pub(crate) fn version(&self) -> Option<Version> {
        self.version
    }

    /// The counters.
    pub(crate) fn counters(&self) -> Counters {
        self.counters
    }

    /// Whether an inactivity probe is waiting for an answer.
    pub(crate) fn probing(&self) -> bool {
        self.probe_sent.is_some()
    }

    /// Messages waiting to be sent.
    pub(crate) fn tx_queued(&self) -> usize {
        self.replies_queued + self.async_queued + self.monitor_queued
    }

    /// Flow monitor updates waiting to be sent: (messages, bytes).
    pub(crate) fn monitor_backlog(&self) -> (usize, usize) {
        (self.monitor_queued, self.monitor_bytes)
    }

    /// Whether requests may be read: not while [`REPLY_MAX`] replies wait to be sent, nor
    /// while the connection is held.
    pub(crate) fn may_read(&self) -> bool {
        !self.held && self.replies_queued < REPLY_MAX
    }

    /// Holds the connection: no further request is read until [`Vconn::release`], so that
    /// the requests after one whose reply is worked out elsewhere (a bundle commit) are
    /// answered after it, as OVS answers a connection's requests in order. A held
    /// connection is not probed: the wait is the switch's, not the peer's.
    pub(crate) fn hold(&mut self) {
        self.held = true;
    }

    /// Whether the connection is held.
    pub(crate) fn held(&self) -> bool {
        self.held
    }

    /// Ends the hold: requests are read again, and the peer's silence counts from `now`.
    pub(crate) fn release(&mut self, now: Instant) {
        self.held = false;
        self.last_activity = self.last_activity.max(now);
        self.probe_sent = None;
    }

    /// Starts or stops keeping copies of the messages exchanged from now on.
    pub(crate) fn set_mirror(&mut self, on: bool) {
        if on != self.mirror.is_some() {
            self.mirror = on.then(Vec::new);
        }
    }

    /// The copies kept since the last call, back to back.
    pub(crate) fn take_mirrored(&mut self) -> Option<Vec<u8>> {
        self.mirror
            .as_mut()
            .filter(|m| !m.is_empty())
            .map(std::mem::take)
    }

    /// Whether the input buffer holds a whole message (or a bad header) not yet taken: then the
    /// connection has work whether or not its socket has more to read.
    pub(crate) fn has_buffered(&self) -> bool {
        !matches!(header::message_len(&self.rx[self.rx_start..]), Ok(None))
    }

    /// Whether anything waits to be written.
    pub(crate) fn wants_write(&self) -> bool {
        !self.txq.is_empty()
    }

    /// How many received bytes wait to be read as messages.
    pub(crate) fn buffered(&self) -> usize {
        self.rx.len() - self.rx_start
    }

    /// The bytes of a message [`Vconn::next_message`] returned.
    pub(crate) fn message(&self, range: Range<usize>) -> &[u8] {
        &self.rx[range]
    }

    /// Reads once from `r` into the input buffer. `Ok(false)` when nothing could be read now.
    pub(crate) fn fill(&mut self, r: &mut impl Read) -> Result<bool, ConnError> {
        if self.rx_start > 0 {
            self.rx.drain(..self.rx_start);
            self.rx_start = 0;
        }
        // A large message is gone: do not keep its room for every idle connection.
        if self.rx.is_empty() && self.rx.capacity() > 2 * READ_CHUNK {
            self.rx = Vec::new();
        }
        let have = self.rx.len();
        self.rx.resize(have + READ_CHUNK, 0);
        let result = loop {
            match r.read(&mut self.rx[have..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        let n = *result.as_ref().unwrap_or(&0);
        self.rx.truncate(have + n);
        match result {
            Ok(0) => Err(ConnError::Eof),
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// The next whole message of the input buffer that is for the message layer, after the
    /// hello exchange, echo requests and replies and the other messages this layer answers
    /// itself. `Ok(None)` when more bytes are needed. An error ends the connection (after what
    /// is queued is flushed: the hello failure's error message).
    pub(crate) fn next_message(&mut self, now: Instant) -> Result<Option<Incoming>, ConnError> {
        loop {
            let buf = &self.rx[self.rx_start..];
            let Some(n) = header::message_len(buf)? else {
                return Ok(None);
            };
            let Some(h) = Header::parse(buf) else {
                return Ok(None);
            };
            let range = self.rx_start..self.rx_start + n;
            self.rx_start += n;
            self.counters.rx_msgs += 1;
            self.last_activity = now;
            self.probe_sent = None;
            let Some(version) = self.version else {
                return self.hello(h, range).map(Some);
            };
            if let Some(m) = self.mirror.as_mut() {
                m.extend_from_slice(&self.rx[range.clone()]);
            }
            match h.msg_type {
                // The answer to a probe: nothing more to do. (A second hello is the message
                // layer's to refuse, as OVS's does, with OFPBRC_BAD_TYPE.)
                OFPT_ECHO_REPLY => {}
                OFPT_ECHO_REQUEST => {
                    let mut reply = self.rx[range].to_vec();
                    reply[1] = OFPT_ECHO_REPLY;
                    self.queue(reply, MsgKind::Reply);
                }
                OFPT_ERROR | OFPT_HELLO => return Ok(Some(Incoming::Message(range))),
                _ if h.version != version.wire() => {
                    let mut reply = Vec::new();
                    error::encode(
                        OfpErr::OfpbrcBadVersion,
                        h.version,
                        h.xid,
                        &self.rx[range],
                        &mut reply,
                    );
                    self.queue(reply, MsgKind::Reply);
                }
                _ => return Ok(Some(Incoming::Message(range))),
            }
        }
    }

    /// The peer's first message, which must be its hello.
    fn hello(&mut self, h: Header, range: Range<usize>) -> Result<Incoming, ConnError> {
        if h.msg_type != OFPT_HELLO {
            return Err(ConnError::NotHello {
                msg_type: h.msg_type,
                version: h.version,
            });
        }
        let peer = hello::decode(&self.rx[range]);
        match hello::negotiate(self.allowed, peer.versions) {
            Ok(v) => {
                self.version = Some(v);
                Ok(Incoming::Connected(v))
            }
            Err(e) => {
                // In the peer's highest version, so that it can read it.
                let version = e.theirs.highest().unwrap_or(Version::Of10.wire());
                let mut m = Vec::new();
                error::encode(
                    OfpErr::OfphfcIncompatible,
                    version,
                    0,
                    e.to_string().as_bytes(),
                    &mut m,
                );
                self.queue(m, MsgKind::Reply);
                Err(ConnError::Incompatible(e))
            }
        }
    }

    /// Queues whole messages (one or more, back to back). Asynchronous messages are dropped
    /// and counted when they would overfill the asynchronous queue (a batch larger than the
    /// whole queue still goes into an empty one); returns whether they were queued.
    pub(crate) fn queue(&mut self, bytes: Vec<u8>, kind: MsgKind) -> bool {
        let n_msgs = count_messages(&bytes);
        if n_msgs == 0 {
            return true;
        }
        match kind {
            MsgKind::Async
                if self.async_queued > 0 && self.async_queued + n_msgs > self.async_limit =>
            {
                self.counters.async_dropped += n_msgs as u64;
                RCONN_OVERFLOW.add(n_msgs as u64);
                return false;
            }
            MsgKind::Async => self.async_queued += n_msgs,
            MsgKind::Reply => self.replies_queued += n_msgs,
            MsgKind::Monitor => {
                self.monitor_queued += n_msgs;
                self.monitor_bytes += bytes.len();
            }
        }
        if let Some(m) = self.mirror.as_mut().filter(|_| self.version.is_some()) {
            m.extend_from_slice(&bytes);
        }
        self.txq.push_back(Queued {
            bytes,
            kind,
            n_msgs,
        });
        RCONN_QUEUED.add(n_msgs as u64);
        true
    }

    /// Writes what is queued to `w` until it would block.
    pub(crate) fn write_to(&mut self, w: &mut impl Write) -> Result<(), ConnError> {
        while let Some(front) = self.txq.front() {
            match w.write(&front.bytes[self.tx_head..]) {
                Ok(0) => return Err(ConnError::Eof),
                Ok(n) => {
                    self.tx_head += n;
                    if self.tx_head == front.bytes.len() {
                        self.tx_head = 0;
                        let done = self.txq.pop_front().expect("front exists");
                        self.counters.tx_msgs += done.n_msgs as u64;
                        RCONN_SENT.add(done.n_msgs as u64);
                        match done.kind {
                            MsgKind::Reply => self.replies_queued -= done.n_msgs,
                            MsgKind::Async => self.async_queued -= done.n_msgs,
                            MsgKind::Monitor => {
                                self.monitor_queued -= done.n_msgs;
                                self.monitor_bytes -= done.bytes.len();
                            }
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e.into()),
            }
        }
        if self.txq.is_empty() && self.txq.capacity() > 64 {
            self.txq.shrink_to(16);
        }
        Ok(())
    }

    /// Runs the inactivity probe: after `probe_interval` without traffic an echo request goes
    /// out, and after another without an answer the connection ends. Returns when to be
    /// called again (`None`: the probe is off).
    pub(crate) fn run_probe(&mut self, now: Instant) -> Result<Option<Instant>, ConnError> {
        if self.probe_interval.is_zero() || self.held {
            return Ok(None);
        }
        if let Some(sent) = self.probe_sent {
            let deadline = sent + self.probe_interval;
            if now >= deadline {
                return Err(ConnError::ProbeTimeout(self.probe_interval));
            }
            return Ok(Some(deadline));
        }
        let due = self.last_activity + self.probe_interval;
        if now < due {
            return Ok(Some(due));
        }
        self.probe_sent = Some(now);
        // Before the hello exchange ends there is no version to probe in; the silence alone
        // ends the connection.
        if let Some(v) = self.version {
            let mut m = Vec::with_capacity(header::HEADER_LEN);
            let at = header::start(&mut m, v.wire(), OFPT_ECHO_REQUEST, self.xid());
            let _ = header::finish(&mut m, at);
            self.queue(m, MsgKind::Reply);
        }
        Ok(Some(now + self.probe_interval))
    }
}

/// How many whole messages `bytes` holds, back to back.
fn count_messages(mut bytes: &[u8]) -> usize {
    let mut n = 0;
    while let Ok(Some(len)) = header::message_len(bytes) {
        n += 1;
        bytes = &bytes[len..];
    }
    debug_assert!(bytes.is_empty(), "queued bytes are whole messages");
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const OF13: VersionSet = VersionSet(1 << 4);

    fn hello_of(set: VersionSet) -> Vec<u8> {
        let mut m = Vec::new();
        hello::encode(set, 9, &mut m);
        m
    }

    fn msg(version: u8, msg_type: u8, xid: u32, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        let at = header::start(&mut m, version, msg_type, xid);
        m.extend_from_slice(body);
        header::finish(&mut m, at).unwrap();
        m
    }

    // What the machine made of its input.
    use super::super::rx_stream::Received as Got;

    /// Feeds `input` and returns what the machine made of it and what it sent.
    fn run(v: &mut Vconn, input: &[u8]) -> (Vec<Got>, Vec<u8>) {
        super::super::rx_stream::drive(v, &mut io::Cursor::new(input.to_vec()), &mut |_| {})
    }

    fn new(allowed: VersionSet) -> Vconn {
        Vconn::new(allowed, Duration::ZERO, DEFAULT_ASYNC_QUEUE, Instant::now())
    }

    #[test]
    fn flow_monitor_updates_are_counted_apart_and_never_dropped() {
        let mut v = Vconn::new(VersionSet::ALL, Duration::ZERO, 1, Instant::now());
        let m = msg(1, 4, 0, &[0; 16]);
        assert!(v.queue(msg(1, 10, 0, &[]), MsgKind::Async));
        for _ in 0..3 {
            assert!(v.queue(m.clone(), MsgKind::Monitor));
        }
        // The asynchronous queue is full, the monitor's is not limited.
        assert!(!v.queue(msg(1, 10, 0, &[]), MsgKind::Async));
        assert_eq!(v.monitor_backlog(), (3, 3 * m.len()));
        assert!(v.may_read());
        let mut sink = Vec::new();
        v.write_to(&mut sink).unwrap();
        assert_eq!(v.monitor_backlog(), (0, 0));
        assert_eq!(v.tx_queued(), 0);
    }

    #[test]
    fn hello_then_echo_is_answered_here_and_the_rest_goes_up() {
        let mut v = new(VersionSet::ALL);
        let input = [
            hello_of(OF13),
            msg(4, OFPT_ECHO_REQUEST, 7, b"abc"),
            msg(4, 5, 8, &[]),
        ]
        .concat();
        let (got, sent) = run(&mut v, &input);
        assert_eq!(
            got,
            [Got::Connected(Version::Of13), Got::Msg(msg(4, 5, 8, &[]))]
        );
        // Our hello (every version: no bitmap), then the echo reply.
        assert_eq!(
            sent,
            [
                msg(6, OFPT_HELLO, 1, &[]),
                msg(4, OFPT_ECHO_REPLY, 7, b"abc")
            ]
            .concat()
        );
        assert_eq!(v.counters().rx_msgs, 3);
        assert_eq!(v.counters().tx_msgs, 2);
    }

    #[test]
    fn no_common_version_sends_ovs_s_error_and_ends() {
        let mut v = new(OF13);
        let (got, sent) = run(&mut v, &hello_of(VersionSet::up_to(1)));
        let Got::Failed(ConnError::Incompatible(e)) = &got[0] else {
            panic!("{got:?}")
        };
        assert_eq!(
            ConnError::Incompatible(*e).to_string(),
            "version negotiation failed (we support version 0x04, peer supports version 0x01)"
        );
        let text = b"We support version 0x04, you support version 0x01, no common versions.";
        // OFPET_HELLO_FAILED (0), OFPHFC_INCOMPATIBLE (0), in OpenFlow 1.0, xid 0.
        let err = msg(1, OFPT_ERROR, 0, &[[0, 0, 0, 0].as_slice(), text].concat());
        // Our hello offers 1.3 alone: a bitmap.
        let ours = msg(4, OFPT_HELLO, 1, &[0, 1, 0, 8, 0, 0, 0, 0x10]);
        assert_eq!(sent, [ours, err].concat());
    }

    #[test]
    fn a_first_message_that_is_not_a_hello_or_a_bad_length_ends_the_connection() {
        let mut v = new(VersionSet::ALL);
        let (got, _) = run(&mut v, &msg(4, OFPT_ECHO_REQUEST, 1, &[]));
        assert_eq!(
            got,
            [Got::Failed(ConnError::NotHello {
                msg_type: 2,
                version: 4
            })]
        );
        let mut v = new(VersionSet::ALL);
        let (got, _) = run(
            &mut v,
            &[hello_of(OF13), vec![4, 5, 0, 4, 0, 0, 0, 0]].concat(),
        );
        assert_eq!(got[1], Got::Failed(ConnError::Framing(FramingError(4))));
    }

    #[test]
    fn a_message_of_another_version_is_refused_with_bad_version() {
        let mut v = new(VersionSet::ALL);
        let req = msg(1, 5, 3, &[]);
        let (got, sent) = run(&mut v, &[hello_of(OF13), req.clone()].concat());
        assert_eq!(got, [Got::Connected(Version::Of13)]);
        let mut err = Vec::new();
        error::encode(OfpErr::OfpbrcBadVersion, 1, 3, &req, &mut err);
        assert_eq!(&sent[8..], err.as_slice());
    }

    #[test]
    fn the_probe_sends_an_echo_then_gives_up() {
        let t0 = Instant::now();
        let s = Duration::from_secs(5);
        let mut v = Vconn::new(VersionSet::ALL, s, DEFAULT_ASYNC_QUEUE, t0);
        let mut out = Vec::new();
        v.write_to(&mut out).unwrap();
        let mut r = io::Cursor::new(hello_of(OF13));
        v.fill(&mut r).unwrap();
        assert!(matches!(
            v.next_message(t0),
            Ok(Some(Incoming::Connected(_)))
        ));
        assert_eq!(v.run_probe(t0), Ok(Some(t0 + s)));
        // Silence: an echo request.
        assert_eq!(v.run_probe(t0 + s), Ok(Some(t0 + 2 * s)));
        assert!(v.probing());
        out.clear();
        v.write_to(&mut out).unwrap();
        assert_eq!(out, msg(4, OFPT_ECHO_REQUEST, 2, &[]));
        // An answer puts it back to sleep; more silence ends the connection.
        let mut r = io::Cursor::new(msg(4, OFPT_ECHO_REPLY, 2, &[]));
        v.fill(&mut r).unwrap();
        let t1 = t0 + s + Duration::from_secs(1);
        assert_eq!(v.next_message(t1), Ok(None));
        assert!(!v.probing());
        assert_eq!(v.run_probe(t1), Ok(Some(t1 + s)));
        assert_eq!(v.run_probe(t1 + s), Ok(Some(t1 + 2 * s)));
        assert_eq!(v.run_probe(t1 + 2 * s), Err(ConnError::ProbeTimeout(s)));
        assert_eq!(
            ConnError::ProbeTimeout(s).to_string(),
            "no response to inactivity probe after 5 seconds, disconnecting"
        );
    }

    #[test]
    fn a_held_connection_reads_nothing_and_is_not_probed_until_released() {
        let t0 = Instant::now();
        let s = Duration::from_secs(5);
        let mut v = Vconn::new(VersionSet::ALL, s, DEFAULT_ASYNC_QUEUE, t0);
        let mut r = io::Cursor::new(hello_of(OF13));
        v.fill(&mut r).unwrap();
        assert!(matches!(
            v.next_message(t0),
            Ok(Some(Incoming::Connected(_)))
        ));
        v.hold();
        assert!(v.held() && !v.may_read());
        // However long the hold, the peer's silence is not held against it.
        assert_eq!(v.run_probe(t0 + 3 * s), Ok(None));
        assert!(!v.probing());
        let t1 = t0 + 3 * s;
        v.release(t1);
        assert!(!v.held() && v.may_read());
        assert_eq!(v.run_probe(t1), Ok(Some(t1 + s)));
    }

    /// A writer that takes `room` bytes and then blocks.
    struct Blocked {
        room: usize,
        got: Vec<u8>,
    }

    impl Write for Blocked {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.room);
            if n == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            self.room -= n;
            self.got.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_peer_that_does_not_read_loses_async_messages_not_replies() {
        let now = Instant::now();
        let mut v = Vconn::new(VersionSet::ALL, Duration::ZERO, 3, now);
        let pin = msg(6, 10, 0, &[0; 100]);
        for _ in 0..5 {
            v.queue(pin.clone(), MsgKind::Async);
        }
        assert_eq!(v.counters().async_dropped, 2);
        // A batch of more than the queue holds is refused while anything is queued.
        assert!(!v.queue([pin.clone(), pin.clone()].concat(), MsgKind::Async));
        assert_eq!(v.counters().async_dropped, 4);
        for i in 0..REPLY_MAX as u32 - 1 {
            assert!(v.may_read());
            assert!(v.queue(msg(6, 21, i, &[]), MsgKind::Reply));
        }
        // The hello and 99 replies: no more requests are read.
        assert!(!v.may_read());
        assert_eq!(v.tx_queued(), 3 + REPLY_MAX);
        let mut w = Blocked {
            room: 50,
            got: Vec::new(),
        };
        v.write_to(&mut w).unwrap();
        assert_eq!(w.got.len(), 50);
        assert_eq!(v.counters().tx_msgs, 1);
        w.room = usize::MAX;
        v.write_to(&mut w).unwrap();
        assert!(v.may_read() && !v.wants_write());
        assert_eq!(v.counters().tx_msgs, 3 + REPLY_MAX as u64);
        assert_eq!(w.got.len(), 8 + 3 * 108 + 99 * 8);
        // Into an empty queue it goes, whatever its size (a snooper's copies of a burst).
        assert!(v.queue(
            [pin.clone(), pin.clone(), pin.clone(), pin].concat(),
            MsgKind::Async
        ));
        assert_eq!(v.tx_queued(), 4);
    }

    #[test]
    fn a_mirror_copies_what_is_exchanged_after_the_hello() {
        let mut v = new(VersionSet::ALL);
        v.set_mirror(true);
        let req = msg(4, OFPT_ECHO_REQUEST, 7, b"x");
        let other = msg(4, 14, 8, &[]);
        run(
            &mut v,
            &[hello_of(OF13), req.clone(), other.clone()].concat(),
        );
        v.queue(msg(4, 10, 0, &[]), MsgKind::Async);
        let reply = msg(4, OFPT_ECHO_REPLY, 7, b"x");
        assert_eq!(
            v.take_mirrored(),
            Some([req, reply, other, msg(4, 10, 0, &[])].concat())
        );
        assert_eq!(v.take_mirrored(), None);
        v.set_mirror(false);
        v.queue(msg(4, 10, 0, &[]), MsgKind::Async);
        assert_eq!(v.take_mirrored(), None);
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic_and_stay_bounded(
            input in proptest::collection::vec(any::<u8>(), 0..2048),
            with_hello: bool,
        ) {
            let mut v = new(VersionSet::ALL);
            let input = if with_hello { [hello_of(OF13), input].concat() } else { input };
            let _ = run(&mut v, &input);
            prop_assert!(v.rx.len() <= header::MAX_MESSAGE_LEN + READ_CHUNK);
        }

        #[test]
        fn negotiation_agrees_with_hello_negotiate(ours in 1u32..128, theirs in 1u32..128) {
            let ours = VersionSet(ours << 1 & VersionSet::ALL.0);
            let theirs = VersionSet(theirs << 1 & VersionSet::ALL.0);
            prop_assume!(!ours.is_empty() && !theirs.is_empty());
            let mut v = new(ours);
            let (got, _) = run(&mut v, &hello_of(theirs));
            match hello::negotiate(ours, theirs) {
                Ok(ver) => prop_assert_eq!(&got[0], &Got::Connected(ver)),
                Err(e) => prop_assert_eq!(&got[0], &Got::Failed(ConnError::Incompatible(e))),
            }
        }
    }
}
