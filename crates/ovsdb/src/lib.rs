//! An OVSDB client: the database protocol of RFC 7047 with Open vSwitch's extensions
//! (`monitor_cond`, `monitor_cond_since`, `update2`, `update3`), as `ovs-vswitchd` uses it to
//! read its configuration from `ovsdb-server` and write its status back. Client only: it never
//! serves a database.
//!
//! - [`jsonrpc`]: JSON-RPC 1.0 framing over a byte stream and the message forms;
//! - [`Atom`], [`Datum`], [`Uuid`]: OVSDB values, in OVSDB's order;
//! - [`Schema`]: a database schema as `get_schema` returns it;
//! - [`Db`]: the replica of the monitored tables and how notifications change it;
//! - [`ops`]: builders for `transact` operations;
//! - [`Idl`]: the background client that connects, locks, monitors, reconnects and runs
//!   transactions.
//!
//! The client knows nothing of what the Open_vSwitch schema means; that is the reconciler's.

#![forbid(unsafe_code)]

mod cache;
mod datum;
mod idl;
pub mod jsonrpc;
pub mod ops;
mod schema;
pub mod stream;

pub use cache::{Cells, Db, Row};
pub use datum::{Atom, Datum, Uuid};
pub use idl::{Idl, IdlOptions, IdlState, IdlWaker, TxnError};
pub use schema::{AtomicType, BaseType, ColumnSchema, ColumnType, Schema, TableSchema};
