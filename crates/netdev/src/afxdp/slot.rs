//! One socket of an `afxdp` port across the life of its interface: lost (out of the XSKMAP,
//! an error counted on every queue that used it) when the interface goes away, rebuilt on the
//! new instance of the interface when it comes back.

use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use datapath::port::QueueStats;

use super::attach::Shared;
use super::error::Fail;
use super::if_xdp::XdpStatistics;
use super::lock;
use super::options::ZeroCopy;
use super::rx::RxSide;
use super::tx::TxSide;
use super::xsk::{Xsk, XskConfig, create_xsk_in_mode};
use crate::bpf::{AttachMode, XskMap};

/// One socket of the port (queue id `qid`), rebuilt when its interface comes back. Its tx
/// side is locked once per burst by the tx queues using it; the rest only on the slow path.
pub(super) struct Slot {
    pub(super) qid: u32,
    /// An rx queue's socket (with an rx ring, in the map); else a tx-only one.
    pub(super) rx: bool,
    /// Held while the socket is (re)built, before `state`: one builder at a time.
    pub(super) build: Mutex<()>,
    pub(super) state: Mutex<SlotState>,
}

pub(super) struct SlotState {
    /// The attachment generation the socket is (to be) built for.
    pub(super) generation: u64,
    /// Bumped whenever the socket is replaced or lost: the rx queue then drops its rx side
    /// and takes the new one.
    pub(super) epoch: u64,
    /// Where the socket is bound; 0 while there is none.
    pub(super) ifindex: u32,
    pub(super) xsk: Option<Arc<Xsk>>,
    pub(super) tx: Option<TxSide>,
    /// The rx side of the socket, until the rx queue takes it.
    pub(super) rx: Option<RxSide>,
    /// Whether the last socket got zero-copy.
    pub(super) zero_copy: bool,
    /// Counters of the queues using the socket: each counts an error when it is lost.
    pub(super) users: Vec<Arc<QueueStats>>,
    /// Kernel counters of the sockets closed so far.
    pub(super) retired: XdpStatistics,
}

impl SlotState {
    pub(super) fn new(generation: u64) -> SlotState {
        SlotState {
            generation,
            epoch: 0,
            ifindex: 0,
            xsk: None,
            tx: None,
            rx: None,
            zero_copy: false,
            users: Vec::new(),
            retired: XdpStatistics::default(),
        }
    }

    pub(super) fn install(
        &mut self,
        ifindex: u32,
        (xsk, rx, tx): (Arc<Xsk>, Option<RxSide>, TxSide),
    ) {
        self.zero_copy = xsk.zero_copy;
        self.xsk = Some(xsk);
        self.tx = Some(tx);
        self.rx = rx;
        self.ifindex = ifindex;
        self.epoch += 1;
    }

    /// The socket's interface is gone: takes it out of the map, keeps its kernel counters,
    /// lets go of it (it closes when the rx queue drops its rx side too) and counts an error
    /// on every queue that used it. Nothing when there is no socket.
    pub(super) fn lose(&mut self, map: &XskMap, slot: &Slot) {
        let Some(xsk) = self.xsk.take() else {
            return;
        };
        if slot.rx {
            let _ = map.remove(slot.qid);
        }
        if let Some(k) = xsk.stats() {
            let r = &mut self.retired;
            r.rx_dropped += k.rx_dropped;
            r.rx_invalid_descs += k.rx_invalid_descs;
            r.tx_invalid_descs += k.tx_invalid_descs;
            r.rx_ring_full += k.rx_ring_full;
            r.rx_fill_ring_empty_descs += k.rx_fill_ring_empty_descs;
            r.tx_ring_empty_descs += k.tx_ring_empty_descs;
        }
        self.tx = None;
        self.rx = None;
        self.ifindex = 0;
        self.epoch += 1;
        for u in &self.users {
            u.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Slot {
    /// Creates and binds this slot's socket on `ifindex` (inside the namespace) and, for an
    /// rx socket, puts it in the map.
    pub(super) fn make(
        &self,
        shared: &Shared,
        ifindex: u32,
        mode: AttachMode,
    ) -> Result<(Arc<Xsk>, Option<RxSide>, TxSide), Fail> {
        let o = &shared.opts;
        let half = o.n_frames / 2;
        let cfg = XskConfig {
            ifindex,
            qid: self.qid,
            rx_frames: if self.rx { half } else { 0 },
            tx_frames: if self.rx { o.n_frames - half } else { half },
            frame_size: o.frame_size,
            ring_size: o.ring_size,
            rx: self.rx,
            zero_copy: false,
        };
        let zc = if self.rx { o.zero_copy } else { ZeroCopy::Off };
        let made =
            crate::netns::run_in_opt(o.netns.as_deref(), || Ok(create_xsk_in_mode(cfg, zc, mode)))
                .map_err(|e| Fail::io("network namespace", &e))??;
        if self.rx {
            shared
                .map
                .set(made.0.qid, made.0.fd.as_raw_fd())
                .map_err(|e| Fail::bpf(&e, ""))?;
        }
        Ok(made)
    }

    /// Brings the socket to generation `generation` (from [`Shared::refresh`]): a socket of an older
    /// generation is lost; with an interface (`ifindex` not 0) and no socket, a new one is
    /// built. A failed build is tried again at the next call.
    pub(super) fn sync(&self, shared: &Shared, generation: u64, ifindex: u32, mode: AttachMode) {
        let _build = lock(&self.build);
        {
            let mut st = lock(&self.state);
            if generation < st.generation {
                // A view older than another queue's: that queue has done the work.
                return;
            }
            if generation > st.generation {
                st.lose(&shared.map, self);
                st.generation = generation;
            }
            if st.xsk.is_some() || ifindex == 0 {
                return;
            }
        }
        // Built without the state lock, so that the tx queues are not held up meanwhile
        // (they find no tx side and drop); `build` keeps other builders out.
        if let Ok(made) = self.make(shared, ifindex, mode) {
            lock(&self.state).install(ifindex, made);
        }
    }
}
