//! The IDL ("interface definition language" client, as OVS calls it): a background thread that
//! keeps a replica of the monitored tables of one database current and lets other threads read
//! consistent snapshots of it and run transactions.
//!
//! The thread connects (`unix:PATH` or `tcp:IP:PORT`), fetches the schema, asks for the lock if
//! one is configured, and monitors the configured tables and columns with the newest method the
//! server has (`monitor_cond_since` with `update3` notifications, else `monitor_cond` with
//! `update2`, else RFC 7047's `monitor` with `update`). It answers the server's `echo`, probes a
//! silent tcp connection, and after losing the connection reconnects with a backoff of 1 s
//! doubling to 8 s, takes the lock again and re-monitors; the snapshot is replaced by the
//! server's contents only once they have arrived, so readers keep the last known contents
//! while the server is away.
//!
//! Readers see a [`Db`] behind an `Arc`: taking a snapshot is a reference count, and an update
//! copies only the table and row it changes while an older snapshot is still held.

use std::collections::HashMap;
use std::fmt;
use std::io::{ErrorKind, Read, Write};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cache::Db;
use crate::datum::Uuid;
use crate::jsonrpc::{Framer, Message};
use crate::schema::Schema;
use crate::stream::{Stream, Target};

/// What to connect to and what to monitor.
#[derive(Clone, Debug, Default)]
pub struct IdlOptions {
    /// `unix:PATH` or `tcp:IP:PORT`.
    pub target: String,
    /// The database name (`Open_vSwitch`).
    pub db: String,
    /// A lock to take (`ovs_vswitchd`); [`Idl::has_lock`] says when it is held.
    pub lock: Option<String>,
    /// Table to columns; an empty column list monitors every column of the table; a table not
    /// listed is not monitored (and an empty list monitors every table).
    pub columns: Vec<(String, Vec<String>)>,
}

/// Where the client stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdlState {
    /// Not connected, or connected and waiting for the initial contents.
    Connecting,
    /// The replica is current (and the lock, if asked for, is held).
    Monitoring,
    /// The replica is current but another client holds our lock.
    LockContended,
}

/// Why a transaction did not commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnError {
    /// A transient failure (a `wait` timed out, the database was replaced): build the
    /// transaction again from the current snapshot and retry.
    TryAgain,
    /// A lock assert failed: this client does not hold the lock.
    NotLocked,
    /// The connection was lost before the reply came.
    Disconnected,
    /// The server refused the transaction.
    Error(String),
}

impl fmt::Display for TxnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TxnError::TryAgain => f.write_str("try again"),
            TxnError::NotLocked => f.write_str("not locked"),
            TxnError::Disconnected => f.write_str("disconnected from the database"),
            TxnError::Error(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for TxnError {}

/// A running client; stopping it (or dropping it) closes the connection and ends the thread.
pub struct Idl {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Wakes the thread waiting in [`Idl::wait`] ([`Idl::waker`]).
#[derive(Clone)]
pub struct IdlWaker {
    shared: Arc<Shared>,
}

impl IdlWaker {
    /// Makes the current or next [`Idl::wait`] return; false once the client has stopped.
    pub fn wake(&self) -> bool {
        let mut st = self.shared.status();
        st.woken = true;
        let alive = !st.stop;
        drop(st);
        self.shared.changed.notify_all();
        alive
    }
}

impl fmt::Debug for Idl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.shared.status();
        f.debug_struct("Idl")
            .field("state", &st.state)
            .field("seqno", &st.seqno)
            .finish()
    }
}

/// What readers see, under one mutex.
struct Status {
    state: IdlState,
    has_lock: bool,
    seqno: u64,
    snapshot: Arc<Db>,
    last_error: Option<String>,
    stop: bool,
    /// An [`IdlWaker`] asked the next [`Idl::wait`] to return.
    woken: bool,
}

/// The connection as transactions use it: writes and the replies they wait for.
struct Conn {
    writer: Stream,
    next_id: u64,
    pending: HashMap<u64, mpsc::Sender<Result<Value, TxnError>>>,
}

struct Shared {
    /// The database's name, the first parameter of every request.
    db: String,
    status: Mutex<Status>,
    changed: Condvar,
    conn: Mutex<Option<Conn>>,
}

impl Shared {
    fn status(&self) -> MutexGuard<'_, Status> {
        self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn conn(&self) -> MutexGuard<'_, Option<Conn>> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the status under the lock, bumps the seqno and wakes waiters.
    fn update(&self, f: impl FnOnce(&mut Status)) {
        let mut st = self.status();
        f(&mut st);
        st.seqno += 1;
        self.changed.notify_all();
    }

    fn stopping(&self) -> bool {
        self.status().stop
    }
}

impl Idl {
    /// Starts the client thread; it connects in the background ([`Idl::state`] says when the
    /// replica is current).
    pub fn start(opts: IdlOptions) -> Idl {
        let shared = Arc::new(Shared {
            db: opts.db.clone(),
            status: Mutex::new(Status {
                state: IdlState::Connecting,
                has_lock: opts.lock.is_none(),
                seqno: 0,
                snapshot: Arc::new(Db::default()),
                last_error: None,
                stop: false,
                woken: false,
            }),
            changed: Condvar::new(),
            conn: Mutex::new(None),
        });
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("ovsdb-idl".to_owned())
            .spawn(move || run(&thread_shared, &opts))
            .expect("spawning the ovsdb-idl thread");
        Idl {
            shared,
            thread: Some(thread),
        }
    }

    pub fn state(&self) -> IdlState {
        self.shared.status().state
    }

    /// True when the configured lock is held, and always when no lock was asked for.
    pub fn has_lock(&self) -> bool {
        self.shared.status().has_lock
    }

    /// A number that changes on every applied update and every change of state or lock.
    pub fn seqno(&self) -> u64 {
        self.shared.status().seqno
    }

    /// Blocks until the seqno differs from `seqno`, an [`IdlWaker`] wakes it or `timeout`
    /// passes; returns the seqno.
    pub fn wait(&self, seqno: u64, timeout: Duration) -> u64 {
        let st = self.shared.status();
        let (mut st, _) = self
            .shared
            .changed
            .wait_timeout_while(st, timeout, |st| st.seqno == seqno && !st.stop && !st.woken)
            .unwrap_or_else(|e| e.into_inner());
        st.woken = false;
        st.seqno
    }

    /// A handle that makes [`Idl::wait`] return early (for events the database does not
    /// carry, as the kernel's address changes), from any thread.
    pub fn waker(&self) -> IdlWaker {
        IdlWaker {
            shared: Arc::clone(&self.shared),
        }
    }

    /// The replica as of now; it does not change while held.
    pub fn snapshot(&self) -> Arc<Db> {
        Arc::clone(&self.shared.status().snapshot)
    }

    /// Why the last connection attempt or connection failed, if it did.
    pub fn last_error(&self) -> Option<String> {
        self.shared.status().last_error.clone()
    }

    /// Runs a transaction of `ops` on the database and waits for its reply: the operations'
    /// results on success. An operation that failed with "timed out" (a `wait`) or a
    /// transaction the server "canceled" gives [`TxnError::TryAgain`], a failed lock assert
    /// ("not owner") [`TxnError::NotLocked`], as OVS's IDL classifies them.
    pub fn transact(&self, ops: Vec<Value>) -> Result<Vec<Value>, TxnError> {
        let (tx, rx) = mpsc::channel();
        {
            let mut conn = self.shared.conn();
            let Some(c) = conn.as_mut() else {
                return Err(TxnError::Disconnected);
            };
            let id = c.next_id;
            c.next_id += 1;
            let mut params = Vec::with_capacity(ops.len() + 1);
            params.push(json!(self.shared.db));
            params.extend(ops);
            let msg = Message::Request {
                method: "transact".to_owned(),
                params: Value::Array(params),
                id: json!(id),
            };
            if c.writer.write_all(&msg.to_bytes()).is_err() {
                c.writer.shutdown();
                return Err(TxnError::Disconnected);
            }
            c.pending.insert(id, tx);
        }
        match rx.recv() {
            Ok(reply) => classify_txn_reply(reply?),
            Err(_) => Err(TxnError::Disconnected),
        }
    }

    /// Closes the connection and waits for the thread to end.
    pub fn stop(mut self) {
        self.stop_thread();
    }

    fn stop_thread(&mut self) {
        self.shared.update(|st| st.stop = true);
        if let Some(c) = self.shared.conn().as_ref() {
            c.writer.shutdown();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Idl {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

/// Maps a transaction's reply to its results or to the error OVS's IDL would report: any
/// other operation error first, then a lock error, then a soft one.
fn classify_txn_reply(result: Value) -> Result<Vec<Value>, TxnError> {
    let Value::Array(results) = result else {
        return Err(TxnError::Error(format!(
            "transact reply is not an array: {result}"
        )));
    };
    let (mut hard, mut not_locked, mut soft) = (None, false, false);
    for r in &results {
        let Some(e) = r.get("error") else { continue };
        match e.as_str() {
            Some("timed out") => soft = true,
            Some("not owner") => not_locked = true,
            _ => {
                if hard.is_none() {
                    let details = r.get("details").and_then(Value::as_str).unwrap_or("");
                    let e = e.as_str().map_or_else(|| e.to_string(), str::to_owned);
                    hard = Some(if details.is_empty() {
                        e
                    } else {
                        format!("{e}: {details}")
                    });
                }
            }
        }
    }
    if let Some(e) = hard {
        Err(TxnError::Error(e))
    } else if not_locked {
        Err(TxnError::NotLocked)
    } else if soft {
        Err(TxnError::TryAgain)
    } else {
        Ok(results)
    }
}

/// The monitor methods, newest first.
const MONITOR_METHODS: [&str; 3] = ["monitor_cond_since", "monitor_cond", "monitor"];

/// What outlives one connection.
struct Resume {
    /// The last transaction `update3` reported, to resume `monitor_cond_since` from.
    last_txn_id: Uuid,
    /// The monitor method the server last accepted.
    method: usize,
}

fn run(shared: &Shared, opts: &IdlOptions) {
    const MIN_BACKOFF: Duration = Duration::from_secs(1);
    const MAX_BACKOFF: Duration = Duration::from_secs(8);
    let mut backoff = MIN_BACKOFF;
    let mut resume = Resume {
        last_txn_id: Uuid::ZERO,
        method: 0,
    };
    loop {
        if shared.stopping() {
            break;
        }
        let mut session = Session {
            shared,
            opts,
            resume: &mut resume,
            monitored: false,
            schema: None,
        };
        let err = match Target::parse(&opts.target) {
            Ok(target) => session.run(&target),
            Err(e) => e,
        };
        let monitored = session.monitored;
        disconnected(shared, opts, err);
        backoff = if monitored {
            MIN_BACKOFF
        } else {
            (backoff * 2).min(MAX_BACKOFF)
        };
        let st = shared.status();
        let _ = shared
            .changed
            .wait_timeout_while(st, backoff, |st| !st.stop);
    }
    disconnected(shared, opts, "stopped".to_owned());
}

/// Fails the transactions in flight and marks the replica as not current.
fn disconnected(shared: &Shared, opts: &IdlOptions, err: String) {
    if let Some(c) = shared.conn().take() {
        c.writer.shutdown();
        for (_, tx) in c.pending {
            let _ = tx.send(Err(TxnError::Disconnected));
        }
    }
    shared.update(|st| {
        st.state = IdlState::Connecting;
        st.has_lock = opts.lock.is_none();
        st.last_error = Some(err);
    });
}

/// One connection's conversation.
struct Session<'a> {
    shared: &'a Shared,
    opts: &'a IdlOptions,
    resume: &'a mut Resume,
    /// The initial contents arrived on this connection.
    monitored: bool,
    schema: Option<Schema>,
}

impl Session<'_> {
    /// Runs until the connection ends; returns why it did.
    fn run(&mut self, target: &Target) -> String {
        let stream = match target.connect() {
            Ok(s) => s,
            Err(e) => return format!("{}: connection attempt failed ({e})", self.opts.target),
        };
        let mut reader = match stream.try_clone() {
            Ok(r) => r,
            Err(e) => return format!("{}: {e}", self.opts.target),
        };
        let _ = stream.set_write_timeout(Some(Duration::from_secs(10)));
        let probe = target.probe_interval();
        let _ = reader.set_read_timeout(probe.map(|_| Duration::from_secs(1)));
        *self.shared.conn() = Some(Conn {
            writer: stream,
            next_id: 1,
            pending: HashMap::new(),
        });
        if self.shared.stopping() {
            return "stopped".to_owned();
        }
        if let Err(e) = self.send("get_schema", json!([self.opts.db])) {
            return e;
        }
        let mut framer = Framer::default();
        let mut buf = vec![0u8; 64 * 1024];
        let mut last_rx = Instant::now();
        let mut probe_sent = false;
        loop {
            match reader.read(&mut buf) {
                Ok(0) => return format!("{}: connection closed by peer", self.opts.target),
                Ok(n) => {
                    last_rx = Instant::now();
                    probe_sent = false;
                    framer.feed(&buf[..n]);
                    loop {
                        match framer.next_message() {
                            Ok(Some(msg)) => {
                                if let Err(e) = self.handle(msg) {
                                    return format!("{}: {e}", self.opts.target);
                                }
                            }
                            Ok(None) => break,
                            Err(e) => return format!("{}: {e}", self.opts.target),
                        }
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return format!("{}: {e}", self.opts.target),
            }
            if self.shared.stopping() {
                return "stopped".to_owned();
            }
            if let Some(interval) = probe {
                let idle = last_rx.elapsed();
                if idle >= interval * 2 && probe_sent {
                    return format!(
                        "{}: no response to inactivity probe after {} seconds, disconnecting",
                        self.opts.target,
                        idle.as_secs()
                    );
                }
                if idle >= interval && !probe_sent {
                    if let Err(e) = self.send("echo", json!([])) {
                        return e;
                    }
                    probe_sent = true;
                }
            }
        }
    }

    /// Sends a request of the client's own; its id is the method's name.
    fn send(&self, method: &str, params: Value) -> Result<(), String> {
        let msg = Message::Request {
            method: method.to_owned(),
            params,
            id: json!(method),
        };
        self.write(&msg)
    }

    fn write(&self, msg: &Message) -> Result<(), String> {
        let mut conn = self.shared.conn();
        let c = conn.as_mut().ok_or("not connected")?;
        c.writer
            .write_all(&msg.to_bytes())
            .map_err(|e| format!("{}: send failed ({e})", self.opts.target))
    }

    fn handle(&mut self, msg: Message) -> Result<(), String> {
        match msg {
            Message::Request { method, params, id } => {
                let reply = if method == "echo" {
                    Message::Reply { result: params, id }
                } else {
                    Message::Error {
                        error: json!("unknown method"),
                        id,
                    }
                };
                self.write(&reply)
            }
            Message::Notify { method, params } => self.notification(&method, &params),
            Message::Reply { result, id } => self.reply(id, Ok(result)),
            Message::Error { error, id } => self.reply(id, Err(error)),
        }
    }

    fn reply(&mut self, id: Value, result: Result<Value, Value>) -> Result<(), String> {
        if let Some(n) = id.as_u64() {
            let tx = self
                .shared
                .conn()
                .as_mut()
                .and_then(|c| c.pending.remove(&n));
            if let Some(tx) = tx {
                let _ = tx.send(result.map_err(|e| {
                    match e.as_str() {
                        Some("canceled") => TxnError::TryAgain,
                        _ => TxnError::Error(
                            e.get("error")
                                .and_then(Value::as_str)
                                .map_or_else(|| e.to_string(), str::to_owned),
                        ),
                    }
                }));
            }
            return Ok(());
        }
        match (id.as_str().unwrap_or(""), result) {
            ("get_schema", Ok(schema)) => {
                self.schema =
                    Some(Schema::from_json(&schema).map_err(|e| format!("bad schema: {e}"))?);
                if let Some(lock) = &self.opts.lock {
                    self.send("lock", json!([lock]))?;
                }
                self.send_monitor()
            }
            ("get_schema", Err(e)) => Err(format!("get_schema failed: {e}")),
            ("lock", Ok(r)) => {
                let locked = r.get("locked").and_then(Value::as_bool).unwrap_or(false);
                self.set_lock(locked);
                Ok(())
            }
            ("lock", Err(e)) => Err(format!("lock failed: {e}")),
            ("echo", _) => Ok(()),
            (m, Err(e)) if MONITOR_METHODS.contains(&m) => {
                if e.as_str() == Some("unknown method")
                    && self.resume.method + 1 < MONITOR_METHODS.len()
                {
                    self.resume.method += 1;
                    return self.send_monitor();
                }
                Err(format!("{m} failed: {e}"))
            }
            (m, Ok(r)) if MONITOR_METHODS.contains(&m) => self.initial(m, &r),
            (other, r) => Err(format!("unexpected reply to {other}: {r:?}")),
        }
    }

    fn send_monitor(&mut self) -> Result<(), String> {
        let schema = self.schema.as_ref().ok_or("monitor before the schema")?;
        let mut requests = serde_json::Map::new();
        let all: Vec<(String, Vec<String>)>;
        let wanted = if self.opts.columns.is_empty() {
            all = schema
                .tables
                .keys()
                .map(|t| (t.clone(), Vec::new()))
                .collect();
            &all
        } else {
            &self.opts.columns
        };
        for (table, cols) in wanted {
            let Some(ts) = schema.table(table) else {
                continue;
            };
            let cols: Vec<&String> = if cols.is_empty() {
                ts.columns.keys().collect()
            } else {
                cols.iter()
                    .filter(|c| ts.columns.contains_key(*c))
                    .collect()
            };
            requests.insert(table.clone(), json!({"columns": cols}));
        }
        let method = MONITOR_METHODS[self.resume.method];
        let mut params = vec![json!(self.opts.db), json!(method), Value::Object(requests)];
        if method == "monitor_cond_since" {
            params.push(json!(self.resume.last_txn_id.to_string()));
        }
        self.send(method, Value::Array(params))
    }

    /// The monitor reply: the initial contents (or, for a resumed `monitor_cond_since`, what
    /// changed since the last transaction seen).
    fn initial(&mut self, method: &str, r: &Value) -> Result<(), String> {
        let schema = self
            .schema
            .take()
            .ok_or("monitor reply before the schema")?;
        let same_schema = *self.shared.status().snapshot.schema() == schema;
        let mut db = Db::new(schema);
        match method {
            "monitor_cond_since" => {
                let [found, last, updates] = r.as_array().map(Vec::as_slice).unwrap_or(&[]) else {
                    return Err("bad monitor_cond_since reply".to_owned());
                };
                let last: Uuid = last.as_str().ok_or("bad last-txn-id")?.parse()?;
                if found.as_bool() == Some(true) && same_schema {
                    db = (*self.shared.status().snapshot).clone();
                }
                db.apply_update2(updates)?;
                self.resume.last_txn_id = last;
            }
            "monitor_cond" => db.apply_update2(r)?,
            _ => db.apply_update(r)?,
        }
        self.monitored = true;
        let locked = self.opts.lock.is_none() || self.shared.status().has_lock;
        self.shared.update(|st| {
            st.snapshot = Arc::new(db);
            st.state = if locked {
                IdlState::Monitoring
            } else {
                IdlState::LockContended
            };
            st.last_error = None;
        });
        Ok(())
    }

    fn set_lock(&self, locked: bool) {
        let monitored = self.monitored;
        self.shared.update(|st| {
            st.has_lock = locked;
            if monitored {
                st.state = if locked {
                    IdlState::Monitoring
                } else {
                    IdlState::LockContended
                };
            }
        });
    }

    fn notification(&mut self, method: &str, params: &Value) -> Result<(), String> {
        let p = params.as_array().map(Vec::as_slice).unwrap_or(&[]);
        match (method, p) {
            ("update", [id, updates]) if *id == json!("monitor") => {
                self.apply(|db| db.apply_update(updates))
            }
            ("update2", [id, updates]) if *id == json!("monitor_cond") => {
                self.apply(|db| db.apply_update2(updates))
            }
            ("update3", [id, last, updates]) if *id == json!("monitor_cond_since") => {
                let last: Uuid = last.as_str().ok_or("bad last-txn-id")?.parse()?;
                self.apply(|db| db.apply_update2(updates))?;
                self.resume.last_txn_id = last;
                Ok(())
            }
            ("locked", [name]) if Some(name.as_str()) == Some(self.opts.lock.as_deref()) => {
                self.set_lock(true);
                Ok(())
            }
            ("stolen", [name]) if Some(name.as_str()) == Some(self.opts.lock.as_deref()) => {
                self.set_lock(false);
                Ok(())
            }
            // Other notifications (another monitor's, a lock not ours) are not for us.
            _ => Ok(()),
        }
    }

    /// Applies a notification to the published replica in place (copying only what a reader
    /// still holds). A notification that does not decode leaves the replica unreliable: the
    /// connection is dropped and the next one starts from the full contents.
    fn apply(&mut self, f: impl FnOnce(&mut Db) -> Result<(), String>) -> Result<(), String> {
        let mut result = Ok(());
        self.shared
            .update(|st| result = f(Arc::make_mut(&mut st.snapshot)));
        if result.is_err() {
            self.resume.last_txn_id = Uuid::ZERO;
        }
        result
    }
}
