//! Bundle commits off the event loop's thread. A commit of 100 000 flow mods takes seconds;
//! were it run where the messages are handled, every connection of the switch would wait for
//! it (echo requests unanswered, probes timing out). The handler hands the commit to this
//! worker and holds the committing connection ([`Handler::holds`]): its later requests (a
//! barrier, a dump) are read and answered only after the commit's reply, as OVS answers a
//! connection's requests in order, while the other connections are served as usual. When the
//! commit is done the worker sends its reply with [`LoopHandle::release`].
//!
//! One worker serves every connection, one commit at a time in the order they come. The
//! tables' change lock ([`Ofproto::begin_bundle`]) keeps a commit and other table changes
//! apart: a flow mod from another connection waits for a running commit, as it would in OVS.
//!
//! [`Handler::holds`]: openflow::conn::Handler::holds

use std::io;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use datapath::dpif::Datapath;
use ofproto::ofproto::Ofproto;
use openflow::conn::{ConnId, Dest, LoopHandle, MsgKind};
use openflow::header::Version;

use super::bundle;
use super::requestforward::{self, Forwarded};

/// A committed bundle, with what its connection is to be answered.
pub(crate) struct CommitJob {
    pub(crate) conn: ConnId,
    pub(crate) version: Version,
    pub(crate) bridge: String,
    /// The bundle's messages, headers included, in order.
    pub(crate) msgs: Vec<Vec<u8>>,
    /// Whether the connection turned on `NXT_FLOW_MOD_TABLE_ID`.
    pub(crate) table_id: bool,
    /// The commit request, header included: a failure's error carries it.
    pub(crate) request: Vec<u8>,
    /// The reply once the bundle is in force.
    pub(crate) reply: Vec<u8>,
    /// The connections that receive the request forwards of group mods, with their versions.
    pub(crate) group_forwards: Vec<(ConnId, Version)>,
}

/// The thread that commits bundles.
pub(crate) struct CommitWorker {
    jobs: Option<Sender<CommitJob>>,
    thread: Option<JoinHandle<()>>,
}

impl CommitWorker {
    /// Starts the worker; replies go to the connections of the loop `lp`.
    pub(crate) fn start(
        of: Arc<Ofproto>,
        dp: Arc<Mutex<Datapath>>,
        lp: LoopHandle,
    ) -> io::Result<CommitWorker> {
        let (tx, rx) = mpsc::channel::<CommitJob>();
        let thread = std::thread::Builder::new()
            .name("ofbundle".into())
            .spawn(move || {
                for job in rx {
                    let reply = commit(&of, &dp, &job, &lp).map_or_else(
                        |f| {
                            let mut out = Vec::new();
                            bundle::encode_failure(&f, job.version, &job.request, &mut out);
                            out
                        },
                        |()| job.reply,
                    );
                    lp.release(job.conn, reply);
                }
            })?;
        Ok(CommitWorker {
            jobs: Some(tx),
            thread: Some(thread),
        })
    }

    /// Queues a commit; its connection gets the reply when it is done.
    pub(crate) fn commit(&self, job: CommitJob) {
        if let Some(tx) = &self.jobs {
            // The worker lives as long as this sender.
            let _ = tx.send(job);
        }
    }
}

/// Commits the job's messages to its bridge; once they are in force, for the packets too: megaflows the
/// new tables made stale are revalidated before the reply says so.
/// The bundle's packet-outs go through the datapath then, and its group mods are forwarded
/// to the connections that asked, before the reply.
fn commit(
    of: &Ofproto,
    dp: &Mutex<Datapath>,
    job: &CommitJob,
    lp: &LoopHandle,
) -> Result<(), bundle::MsgFailed> {
    let done = bundle::commit(
        of,
        job.conn,
        job.version,
        &job.bridge,
        &job.msgs,
        job.table_id,
    )?;
    of.sync_megaflows(dp);
    for p in done.prepared {
        super::packet_out::run_prepared(dp, p);
    }
    for (xid, gm) in &done.group_mods {
        for &(id, version) in &job.group_forwards {
            if let Some(m) = requestforward::message(version, *xid, Forwarded::Group(gm)) {
                lp.send(Dest::Conn(id), m, MsgKind::Async);
            }
        }
    }
    Ok(())
}

impl Drop for CommitWorker {
    fn drop(&mut self) {
        // The worker ends with its queue: the commits queued are carried out first.
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
