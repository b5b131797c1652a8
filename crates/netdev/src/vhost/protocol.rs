//! The back-end's side of the vhost-user protocol: the control thread serves one front-end
//! connection at a time, and its handler acts on the messages (rust-vmm's `vhost` crate decodes
//! them): features, guest memory, and each vring's size, addresses, base and eventfds, from
//! which it starts the ring in its slot and stops it again.

use crate::log::{PEER, log, log_rl};
use std::fs::File;
use std::io;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use vlog::Level;

use vhost::vhost_user::message::{
    VhostTransferStateDirection, VhostTransferStatePhase, VhostUserConfigFlags, VhostUserInflight,
    VhostUserLog, VhostUserMemoryRegion, VhostUserProtocolFeatures, VhostUserShMemConfig,
    VhostUserSharedMsg, VhostUserSingleMemoryRegion, VhostUserVringAddrFlags, VhostUserVringState,
};
use vhost::vhost_user::{
    BackendReqHandler, Error as VuError, GpuBackend, Result as VuResult,
    VhostUserBackendReqHandlerMut,
};
use virtio_queue::{Queue, QueueT};
use vm_memory::{GuestAddress, GuestMemoryMmap};

use super::features::{F_MRG_RXBUF, F_PROTOCOL_FEATURES, F_VERSION_1};
use super::guest_memory::map_regions;
use super::options::VhostOptions;
use super::socket::Peer;
use super::vring::Ring;
use super::{Shared, Status, lock};
use crate::vnet;

/// Largest ring the back-end takes (the virtio maximum for a split ring).
pub(super) const MAX_RING: u16 = 32768;

/// Per-vring configuration as the front-end gives it.
pub(super) struct VringConf {
    pub(super) num: u16,
    /// Front-end virtual addresses of the descriptor table, available and used rings.
    pub(super) addr: Option<(u64, u64, u64)>,
    pub(super) base: u16,
    pub(super) kicked: bool,
    /// Enabled unless the front-end said otherwise. The protocol has rings start disabled
    /// once `PROTOCOL_FEATURES` is negotiated, but QEMU (7.2) sends its `SET_VRING_ENABLE`s
    /// before `SET_FEATURES`, which rust-vmm's handler refuses unseen (`InactiveFeature`):
    /// starting disabled would leave a QEMU guest's rings stopped for good. DPDK's vhost
    /// library, which applies those messages, ends in the same state.
    pub(super) enabled: bool,
    pub(super) call: Option<Arc<File>>,
}

impl Default for VringConf {
    fn default() -> Self {
        VringConf {
            num: 0,
            addr: None,
            base: 0,
            kicked: false,
            enabled: true,
            call: None,
        }
    }
}

/// One guest memory region: where the front-end has it and its guest address.
#[derive(Clone, Copy)]
pub(super) struct Region {
    pub(super) user: u64,
    pub(super) gpa: u64,
    pub(super) size: u64,
}

/// The back-end side of one connection.
pub(super) struct Handler {
    pub(super) shared: Arc<Shared>,
    pub(super) opts: VhostOptions,
    pub(super) acked: u64,
    pub(super) protocol: u64,
    pub(super) mem: Option<Arc<GuestMemoryMmap>>,
    pub(super) regions: Vec<Region>,
    pub(super) vrings: Vec<VringConf>,
}

impl Handler {
    pub(super) fn new(shared: Arc<Shared>, opts: VhostOptions) -> Handler {
        let n = shared.slots.len();
        Handler {
            shared,
            opts,
            acked: 0,
            protocol: 0,
            mem: None,
            regions: Vec::new(),
            vrings: (0..n).map(|_| VringConf::default()).collect(),
        }
    }

    fn vring(&mut self, index: u32) -> VuResult<&mut VringConf> {
        self.vrings
            .get_mut(index as usize)
            .ok_or(VuError::InvalidParam)
    }

    fn gpa(&self, user: u64) -> Option<u64> {
        self.regions
            .iter()
            .find(|r| user >= r.user && user - r.user < r.size)
            .map(|r| user - r.user + r.gpa)
    }

    /// Stops vring `i`: its ring leaves the slot and its position is kept as the base.
    fn stop(&mut self, i: usize) {
        if let Some(r) = self.shared.take(i) {
            self.vrings[i].base = r.q.next_avail();
        }
    }

    /// Stops vring `i` and starts it again on the current configuration if it is complete,
    /// kicked and enabled.
    fn restart(&mut self, i: usize) {
        self.stop(i);
        let ring = match self.build(i) {
            Ok(r) => r,
            Err(why) => {
                if !why.is_empty() {
                    log_rl(
                        &PEER,
                        Level::Warn,
                        &format!(
                            "vhost port '{}': vring {i} not started: {why}",
                            self.shared.name
                        ),
                    );
                }
                None
            }
        };
        if ring.is_some() {
            *lock(&self.shared.slots[i]) = ring;
        }
        self.shared.update_started();
    }

    fn restart_all(&mut self) {
        for i in 0..self.vrings.len() {
            self.restart(i);
        }
    }

    fn stop_all(&mut self) {
        for i in 0..self.vrings.len() {
            self.stop(i);
        }
        self.shared.update_started();
    }

    /// The ring of vring `i`, `None` when it is not ready; an error (with a reason worth
    /// telling, or empty) when its configuration is unusable.
    pub(super) fn build(&self, i: usize) -> Result<Option<Ring>, String> {
        let v = &self.vrings[i];
        let (Some(mem), Some((desc, avail, used))) = (&self.mem, v.addr) else {
            return Ok(None);
        };
        if !v.kicked || !v.enabled || v.num == 0 {
            return Ok(None);
        }
        let gpa = |a: u64, what: &str| {
            self.gpa(a)
                .ok_or_else(|| format!("{what} address {a:#x} is outside guest memory"))
        };
        let mut q = Queue::new(MAX_RING).map_err(|e| e.to_string())?;
        q.try_set_size(v.num)
            .map_err(|e| format!("size {}: {e}", v.num))?;
        q.try_set_desc_table_address(GuestAddress(gpa(desc, "descriptor table")?))
            .map_err(|e| e.to_string())?;
        q.try_set_avail_ring_address(GuestAddress(gpa(avail, "available ring")?))
            .map_err(|e| e.to_string())?;
        q.try_set_used_ring_address(GuestAddress(gpa(used, "used ring")?))
            .map_err(|e| e.to_string())?;
        q.set_next_avail(v.base);
        q.set_next_used(v.base);
        q.set_event_idx(false);
        q.set_ready(true);
        if !q.is_valid(&**mem) {
            return Err("its rings do not lie in guest memory".into());
        }
        q.disable_notification(&**mem).map_err(|e| e.to_string())?;
        // A front-end that reconnects with rings already in use (DPDK's virtio_user in server
        // mode) still says base 0: the used index in guest memory is where the ring is, as
        // DPDK's vhost library and QEMU take it.
        let used = q
            .used_idx(&**mem, std::sync::atomic::Ordering::Acquire)
            .map_err(|e| e.to_string())?
            .0;
        if used != v.base {
            log_rl(
                &PEER,
                Level::Warn,
                &format!(
                    "vhost port '{}': vring {i}: base {} but the used index is {used}; \
                     resuming from the used index",
                    self.shared.name, v.base
                ),
            );
            q.set_next_avail(used);
            q.set_next_used(used);
        }
        let hdr_len = if self.acked & (F_VERSION_1 | F_MRG_RXBUF) != 0 {
            vnet::HDR_LEN
        } else {
            vnet::HDR_LEN_LEGACY
        };
        Ring::start(
            &q,
            mem.clone(),
            v.call.clone(),
            hdr_len,
            self.acked,
            self.shared.rx_drops.clone(),
        )
        .map(Some)
    }

    fn unsupported<T>(&self, what: &'static str) -> VuResult<T> {
        Err(VuError::InvalidOperation(what))
    }
}

impl VhostUserBackendReqHandlerMut for Handler {
    fn set_owner(&mut self) -> VuResult<()> {
        Ok(())
    }

    fn reset_owner(&mut self) -> VuResult<()> {
        self.stop_all();
        self.acked = 0;
        Ok(())
    }

    fn reset_device(&mut self) -> VuResult<()> {
        self.reset_owner()
    }

    fn get_features(&mut self) -> VuResult<u64> {
        Ok(self.opts.features())
    }

    fn set_features(&mut self, features: u64) -> VuResult<()> {
        if features & !self.opts.features() != 0 {
            return Err(VuError::InvalidParam);
        }
        self.acked = features;
        if features & F_PROTOCOL_FEATURES == 0 {
            // Without vhost-user protocol features a ring is enabled once it is kicked.
            for v in &mut self.vrings {
                v.enabled = true;
            }
        }
        lock(&self.shared.status).features = features;
        self.restart_all();
        Ok(())
    }

    fn set_mem_table(
        &mut self,
        ctx: &[VhostUserMemoryRegion],
        files: Vec<File>,
        _postcopy_listening: Option<bool>,
    ) -> VuResult<Option<Vec<u64>>> {
        let mem = map_regions(ctx, files).map_err(|e| {
            log_rl(
                &PEER,
                Level::Warn,
                &format!("vhost port '{}': SET_MEM_TABLE: {e}", self.shared.name),
            );
            VuError::InvalidParam
        })?;
        self.stop_all();
        self.regions = ctx
            .iter()
            .map(|r| Region {
                user: r.user_addr,
                gpa: r.guest_phys_addr,
                size: r.memory_size,
            })
            .collect();
        self.mem = Some(Arc::new(mem));
        self.restart_all();
        Ok(None)
    }

    fn set_vring_num(&mut self, index: u32, num: u32) -> VuResult<()> {
        if num == 0 || num > u32::from(MAX_RING) || !num.is_power_of_two() {
            return Err(VuError::InvalidParam);
        }
        self.vring(index)?.num = num as u16;
        self.restart(index as usize);
        Ok(())
    }

    fn set_vring_addr(
        &mut self,
        index: u32,
        _flags: VhostUserVringAddrFlags,
        descriptor: u64,
        used: u64,
        available: u64,
        _log: u64,
    ) -> VuResult<()> {
        self.vring(index)?.addr = Some((descriptor, available, used));
        self.restart(index as usize);
        Ok(())
    }

    fn set_vring_base(&mut self, index: u32, base: u32) -> VuResult<()> {
        self.vring(index)?;
        self.stop(index as usize);
        self.vrings[index as usize].base = base as u16;
        self.restart(index as usize);
        Ok(())
    }

    fn get_vring_base(&mut self, index: u32) -> VuResult<VhostUserVringState> {
        self.vring(index)?;
        let i = index as usize;
        self.stop(i);
        // GET_VRING_BASE stops the ring until it is kicked again.
        self.vrings[i].kicked = false;
        self.shared.update_started();
        Ok(VhostUserVringState::new(
            index,
            u32::from(self.vrings[i].base),
        ))
    }

    fn set_vring_kick(&mut self, index: u8, _fd: Option<File>) -> VuResult<()> {
        // The ring is polled: the kick eventfd itself is never read.
        self.vring(u32::from(index))?.kicked = true;
        self.restart(usize::from(index));
        Ok(())
    }

    fn set_vring_call(&mut self, index: u8, fd: Option<File>) -> VuResult<()> {
        self.vring(u32::from(index))?.call = fd.map(Arc::new);
        if lock(&self.shared.slots[usize::from(index)]).is_some() {
            self.restart(usize::from(index));
        }
        Ok(())
    }

    fn set_vring_err(&mut self, index: u8, _fd: Option<File>) -> VuResult<()> {
        self.vring(u32::from(index))?;
        Ok(())
    }

    fn get_protocol_features(&mut self) -> VuResult<VhostUserProtocolFeatures> {
        Ok(self.opts.protocol_features())
    }

    fn set_protocol_features(&mut self, features: u64) -> VuResult<()> {
        self.protocol = features;
        lock(&self.shared.status).protocol = features;
        Ok(())
    }

    fn get_queue_num(&mut self) -> VuResult<u64> {
        Ok(self.opts.queues as u64)
    }

    fn set_vring_enable(&mut self, index: u32, enable: bool) -> VuResult<()> {
        self.vring(index)?.enabled = enable;
        self.restart(index as usize);
        Ok(())
    }

    fn get_config(
        &mut self,
        offset: u32,
        size: u32,
        _flags: VhostUserConfigFlags,
    ) -> VuResult<Vec<u8>> {
        // struct virtio_net_config: mac, status (LINK_UP), max_virtqueue_pairs, mtu.
        let mut c = [0u8; 12];
        c[..6].copy_from_slice(&self.opts.mac.unwrap_or_default());
        c[6..8].copy_from_slice(&1u16.to_le_bytes());
        c[8..10].copy_from_slice(&(self.opts.queues as u16).to_le_bytes());
        c[10..12].copy_from_slice(&self.opts.mtu.unwrap_or(1500).to_le_bytes());
        let (o, s) = (offset as usize, size as usize);
        let mut out = vec![0u8; s];
        if o < c.len() {
            let k = s.min(c.len() - o);
            out[..k].copy_from_slice(&c[o..o + k]);
        }
        Ok(out)
    }

    fn set_config(
        &mut self,
        _offset: u32,
        _buf: &[u8],
        _flags: VhostUserConfigFlags,
    ) -> VuResult<()> {
        // The network device's configuration is read-only for the driver.
        Ok(())
    }

    fn set_gpu_socket(&mut self, _gpu_backend: GpuBackend) -> VuResult<()> {
        self.unsupported("GPU_SET_SOCKET")
    }

    fn get_shared_object(&mut self, _uuid: VhostUserSharedMsg) -> VuResult<File> {
        self.unsupported("GET_SHARED_OBJECT")
    }

    fn get_inflight_fd(&mut self, _i: &VhostUserInflight) -> VuResult<(VhostUserInflight, File)> {
        self.unsupported("GET_INFLIGHT_FD")
    }

    fn set_inflight_fd(&mut self, _i: &VhostUserInflight, _file: File) -> VuResult<()> {
        self.unsupported("SET_INFLIGHT_FD")
    }

    fn get_max_mem_slots(&mut self) -> VuResult<u64> {
        self.unsupported("GET_MAX_MEM_SLOTS")
    }

    fn add_mem_region(
        &mut self,
        _region: &VhostUserSingleMemoryRegion,
        _fd: File,
        _postcopy_listening: Option<bool>,
    ) -> VuResult<Option<u64>> {
        self.unsupported("ADD_MEM_REG")
    }

    fn remove_mem_region(&mut self, _region: &VhostUserSingleMemoryRegion) -> VuResult<()> {
        self.unsupported("REM_MEM_REG")
    }

    fn set_device_state_fd(
        &mut self,
        _direction: VhostTransferStateDirection,
        _phase: VhostTransferStatePhase,
        _fd: File,
    ) -> VuResult<Option<File>> {
        self.unsupported("SET_DEVICE_STATE_FD")
    }

    fn check_device_state(&mut self) -> VuResult<()> {
        self.unsupported("CHECK_DEVICE_STATE")
    }

    fn get_shmem_config(&mut self) -> VuResult<VhostUserShMemConfig> {
        self.unsupported("GET_SHMEM_CONFIG")
    }

    fn set_log_base(&mut self, _log: &VhostUserLog, _file: File) -> VuResult<()> {
        self.unsupported("SET_LOG_BASE")
    }
}

/// The control thread: waits for (or makes) a connection, serves it until it ends, and
/// starts over until the port closes.
pub(super) fn control(
    shared: &Arc<Shared>,
    opts: &VhostOptions,
    socket: &Path,
    listener: Option<UnixListener>,
) {
    let mut peer = Peer::new("vhost", &shared.name, listener, socket);
    while !shared.stop.load(Relaxed) {
        let Some(stream) = peer.next(&shared.stop) else {
            continue;
        };
        if stream.set_nonblocking(false).is_err() {
            continue;
        }
        serve(shared, opts, stream);
    }
}

/// Serves one connection until the front-end goes away (or breaks the protocol) or the port
/// closes; then every ring of it is stopped and its memory released.
pub(super) fn serve(shared: &Arc<Shared>, opts: &VhostOptions, stream: UnixStream) {
    let Ok(clone) = stream.try_clone() else {
        return;
    };
    *lock(&shared.conn) = Some(clone);
    if shared.stop.load(Relaxed) {
        return;
    }
    {
        let mut st = lock(&shared.status);
        *st = Status {
            connected: true,
            connections: st.connections + 1,
            ..Status::default()
        };
    }
    log(
        Level::Info,
        &format!("vhost port '{}': connected", shared.name),
    );
    let handler = Arc::new(Mutex::new(Handler::new(shared.clone(), opts.clone())));
    let mut req = BackendReqHandler::from_stream(stream, handler.clone());
    let why = loop {
        if shared.stop.load(Relaxed) {
            break None;
        }
        match req.handle_request() {
            Ok(()) => {}
            Err(VuError::Disconnected | VuError::PartialMessage) => break None,
            Err(VuError::SocketBroken(e)) if e.kind() == io::ErrorKind::ConnectionReset => {
                break None;
            }
            // DPDK's virtio_user (22.11) in server mode, on a reconnection, stops the old
            // device on the new connection first: SET_VRING_ENABLE before any SET_FEATURES,
            // which rust-vmm's handler refuses (InactiveFeature) after reading the whole
            // message. Nothing is owed to the front-end (no REPLY_ACK yet): carry on.
            Err(VuError::InactiveFeature(f)) => {
                log_rl(
                    &PEER,
                    Level::Warn,
                    &format!(
                        "vhost port '{}': ignoring a request that needs feature {f:?} before \
                         it was negotiated",
                        shared.name
                    ),
                );
            }
            Err(e) => break Some(e),
        }
    };
    drop(req);
    *lock(&shared.conn) = None;
    lock(&handler).stop_all();
    drop(handler);
    lock(&shared.status).connected = false;
    match why {
        Some(e) if !shared.stop.load(Relaxed) => log_rl(
            &PEER,
            Level::Warn,
            &format!("vhost port '{}': closing the connection: {e}", shared.name),
        ),
        _ => log(
            Level::Info,
            &format!("vhost port '{}': disconnected", shared.name),
        ),
    }
}
