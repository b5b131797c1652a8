//! The vhost-user device as the driver sets it up, one connection at a time: the control
//! thread finds the back-end, negotiates features and queue pairs, shares the rings' memory,
//! starts every vring, and resets them all when a PMD took one out of service (DPDK's
//! `virtio_user_dev.c` plays this part for its `net_virtio_user` ports).

use crate::log::{PEER, log, log_rl};
use std::io::{self, Read as _, Write as _};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::time::Duration;
use vlog::Level;

use vhost::vhost_user::message::VhostUserHeaderFlag;
use vhost::vhost_user::{Frontend, VhostUserFrontend, VhostUserProtocolFeatures};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vmm_sys_util::eventfd::EventFd;

use super::options::VirtioUserOptions;
use super::vring::{Layout, SharedMem, Vring};
use super::{RECONNECT, Shared};
use crate::vhost::{F_MQ, F_MRG_RXBUF, F_PROTOCOL_FEATURES, F_VERSION_1, Peer, lock, nap};
use crate::vnet;

/// How long the back-end may take to answer a request before the connection is given up.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// vhost-user request `GET_QUEUE_NUM` and the header flags of the protocol.
const REQ_GET_QUEUE_NUM: u32 = 17;
const HDR_VERSION_1: u32 = 0x1;
const HDR_REPLY: u32 = 0x4;

/// The control thread: waits for (or makes) a connection, drives it until it ends, and
/// starts over until the port closes.
pub(super) fn control(
    shared: &Arc<Shared>,
    opts: &VirtioUserOptions,
    listener: Option<UnixListener>,
) {
    let mut peer = Peer::new("virtio_user", &shared.name, listener, &opts.path);
    while !shared.stop.load(Relaxed) {
        let Some(stream) = peer.next(&shared.stop) else {
            continue;
        };
        match session(shared, opts, stream) {
            Ok(()) if shared.stop.load(Relaxed) => {}
            Ok(()) => log(
                Level::Info,
                &format!("virtio_user port '{}': back-end disconnected", shared.name),
            ),
            Err(e) => log_rl(
                &PEER,
                Level::Warn,
                &format!(
                    "virtio_user port '{}': closing the connection: {e}",
                    shared.name
                ),
            ),
        }
        // A back-end that accepts and drops at once is not retried in a tight loop.
        if !peer.listens() {
            nap(&shared.stop, RECONNECT);
        }
    }
}

/// Ends a connection whichever way its session leaves: the rings leave the PMDs' hands
/// (after any burst on them), and the status says so.
struct Teardown<'a>(&'a Shared);

impl Drop for Teardown<'_> {
    fn drop(&mut self) {
        let shared = self.0;
        *lock(&shared.conn) = None;
        shared.pairs.store(0, Relaxed);
        for s in shared.slots.iter() {
            lock(s).take();
        }
        for r in shared.reset.iter() {
            r.store(false, Relaxed);
        }
        let mut st = lock(&shared.status);
        st.connected = false;
        st.pairs = 0;
        st.features = 0;
        st.protocol = 0;
    }
}

/// Drives one connection: sets the device up, puts its rings in service, then watches the
/// socket and resets rings the PMDs took out of service, until the back-end goes away or the
/// port closes.
fn session(shared: &Shared, opts: &VirtioUserOptions, stream: UnixStream) -> Result<(), String> {
    // Declared first, dropped last: after the device's memory and eventfds are released by
    // this function, the rings holding the memory leave their slots.
    let _teardown = Teardown(shared);
    let setup = |e: io::Error| format!("socket setup: {e}");
    stream.set_nonblocking(false).map_err(setup)?;
    stream.set_read_timeout(Some(IO_TIMEOUT)).map_err(setup)?;
    stream.set_write_timeout(Some(IO_TIMEOUT)).map_err(setup)?;
    let conn = stream.try_clone().map_err(setup)?;
    *lock(&shared.conn) = Some(conn.try_clone().map_err(setup)?);
    if shared.stop.load(Relaxed) {
        return Ok(());
    }
    {
        let mut st = lock(&shared.status);
        st.connected = true;
        st.connections += 1;
    }
    let mut dev = Device::negotiate(stream, &conn, opts)?;
    dev.start(shared)?;
    {
        let mut st = lock(&shared.status);
        st.features = dev.features;
        st.protocol = dev.protocol.bits();
        st.pairs = dev.pairs;
    }
    log(
        Level::Info,
        &format!(
            "virtio_user port '{}': connected, {} queue pair(s), features {:#x}",
            shared.name, dev.pairs, dev.features
        ),
    );
    loop {
        if shared.stop.load(Relaxed) {
            return Ok(());
        }
        if !watch(&conn)? {
            return Ok(());
        }
        let mut reset = false;
        for r in shared.reset.iter() {
            reset |= r.swap(false, Acquire);
        }
        if reset {
            dev.reset(shared)?;
            shared.resets_done.fetch_add(1, Release);
            log_rl(
                &PEER,
                Level::Info,
                &format!(
                    "virtio_user port '{}': device reset, rings set up again",
                    shared.name
                ),
            );
        }
    }
}

/// Waits a little for the back-end to say something; false when it went away. A back-end
/// speaks only when asked: anything else on the socket ends the connection.
fn watch(conn: &UnixStream) -> Result<bool, String> {
    let mut p = libc::pollfd {
        fd: conn.as_raw_fd(),
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the duration of the call.
    let r = unsafe { libc::poll(&mut p, 1, 20) };
    if r <= 0 {
        return Ok(true);
    }
    if p.revents & (libc::POLLHUP | libc::POLLRDHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        return Ok(false);
    }
    let mut buf = [0u8; 64];
    match (&*conn).read(&mut buf) {
        Ok(0) => Ok(false),
        Ok(_) => Err("the back-end sent a message that was not asked for".into()),
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Ok(false),
        Err(e) => Err(format!("socket: {e}")),
    }
}

/// `GET_QUEUE_NUM` on the socket itself (see the module's introduction): the queue pairs
/// the back-end serves.
fn get_queue_num(mut conn: &UnixStream) -> Result<u64, String> {
    let e = |e: io::Error| format!("GET_QUEUE_NUM: {e}");
    let mut req = [0u8; 12];
    req[..4].copy_from_slice(&REQ_GET_QUEUE_NUM.to_le_bytes());
    req[4..8].copy_from_slice(&HDR_VERSION_1.to_le_bytes());
    conn.write_all(&req).map_err(e)?;
    let mut hdr = [0u8; 12];
    conn.read_exact(&mut hdr).map_err(e)?;
    let word = |i: usize| u32::from_le_bytes([hdr[i], hdr[i + 1], hdr[i + 2], hdr[i + 3]]);
    if word(0) != REQ_GET_QUEUE_NUM || word(4) & HDR_REPLY == 0 || word(8) != 8 {
        return Err(format!(
            "GET_QUEUE_NUM: unexpected reply (request {}, flags {:#x}, size {})",
            word(0),
            word(4),
            word(8)
        ));
    }
    let mut v = [0u8; 8];
    conn.read_exact(&mut v).map_err(e)?;
    Ok(u64::from_le_bytes(v))
}

/// The device side of one connection as the driver sees it: the protocol endpoint and what
/// was agreed, and the memory and eventfds given to the back-end.
struct Device {
    fe: Frontend,
    mem: Arc<SharedMem>,
    layout: Layout,
    pairs: usize,
    hdr_len: usize,
    features: u64,
    protocol: VhostUserProtocolFeatures,
    kicks: Vec<Arc<EventFd>>,
    /// One call eventfd for every ring: the driver polls, and never reads it.
    call: EventFd,
}

fn proto(what: &'static str) -> impl Fn(vhost::Error) -> String {
    move |e| format!("{what}: {e}")
}

impl Device {
    /// Negotiates features over `stream` (`conn` is the same socket) and shares fresh memory
    /// for `opts`' rings.
    fn negotiate(
        stream: UnixStream,
        conn: &UnixStream,
        opts: &VirtioUserOptions,
    ) -> Result<Device, String> {
        let mut fe = Frontend::from_stream(stream, 2 * opts.queues as u64);
        let offered = fe.get_features().map_err(proto("GET_FEATURES"))?;
        let mut features = offered & (F_VERSION_1 | F_PROTOCOL_FEATURES);
        let mut protocol = VhostUserProtocolFeatures::empty();
        let mut pairs = 1;
        if offered & F_PROTOCOL_FEATURES != 0 {
            let pf = fe
                .get_protocol_features()
                .map_err(proto("GET_PROTOCOL_FEATURES"))?;
            protocol = pf & (VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::REPLY_ACK);
            fe.set_protocol_features(protocol)
                .map_err(proto("SET_PROTOCOL_FEATURES"))?;
            if opts.queues > 1
                && offered & F_MQ != 0
                && protocol.contains(VhostUserProtocolFeatures::MQ)
            {
                let n = get_queue_num(conn)?;
                pairs = opts
                    .queues
                    .min(usize::try_from(n).unwrap_or(usize::MAX))
                    .max(1);
            }
            if protocol.contains(VhostUserProtocolFeatures::REPLY_ACK) {
                fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
            }
        }
        if pairs > 1 {
            features |= F_MQ;
        }
        fe.set_owner().map_err(proto("SET_OWNER"))?;
        fe.set_features(features).map_err(proto("SET_FEATURES"))?;
        let layout = Layout::new(opts.queue_size);
        let mem = SharedMem::new(2 * pairs * layout.len)
            .map_err(|e| format!("guest memory of {} bytes: {e}", 2 * pairs * layout.len))?;
        let region = VhostUserMemoryRegionInfo {
            guest_phys_addr: 0,
            memory_size: mem.len as u64,
            userspace_addr: mem.addr(),
            mmap_offset: 0,
            mmap_handle: mem.fd.as_raw_fd(),
        };
        fe.set_mem_table(&[region])
            .map_err(proto("SET_MEM_TABLE"))?;
        let eventfd = || {
            EventFd::new(libc::EFD_NONBLOCK | libc::EFD_CLOEXEC)
                .map_err(|e| format!("eventfd: {e}"))
        };
        let kicks = (0..2 * pairs)
            .map(|_| eventfd().map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Device {
            fe,
            mem: Arc::new(mem),
            layout,
            pairs,
            hdr_len: if features & (F_VERSION_1 | F_MRG_RXBUF) != 0 {
                vnet::HDR_LEN
            } else {
                vnet::HDR_LEN_LEGACY
            },
            features,
            protocol,
            kicks,
            call: eventfd()?,
        })
    }

    /// Sets vring `i` up from scratch, in memory and with the back-end.
    fn start_ring(&mut self, i: usize) -> Result<Vring, String> {
        let ring = Vring::new(
            self.mem.clone(),
            i,
            self.layout,
            i.is_multiple_of(2),
            self.hdr_len,
            self.kicks[i].clone(),
        )
        .ok_or("vring outside guest memory")?;
        let n = self.layout.size;
        self.fe
            .set_vring_num(i, n)
            .map_err(proto("SET_VRING_NUM"))?;
        self.fe
            .set_vring_base(i, 0)
            .map_err(proto("SET_VRING_BASE"))?;
        let config = VringConfigData {
            queue_max_size: n,
            queue_size: n,
            flags: 0,
            desc_table_addr: ring.desc as u64,
            used_ring_addr: ring.used as u64,
            avail_ring_addr: ring.avail as u64,
            log_addr: None,
        };
        self.fe
            .set_vring_addr(i, &config)
            .map_err(proto("SET_VRING_ADDR"))?;
        self.fe
            .set_vring_kick(i, &self.kicks[i])
            .map_err(proto("SET_VRING_KICK"))?;
        self.fe
            .set_vring_call(i, &self.call)
            .map_err(proto("SET_VRING_CALL"))?;
        if self.features & F_PROTOCOL_FEATURES != 0 {
            self.fe
                .set_vring_enable(i, true)
                .map_err(proto("SET_VRING_ENABLE"))?;
        }
        // A receive ring starts with its buffers available: a device that waits for kicks
        // learns of them now.
        ring.notify();
        Ok(ring)
    }

    /// Sets every ring up and puts it in service.
    fn start(&mut self, shared: &Shared) -> Result<(), String> {
        let n = 2 * self.pairs;
        let mut rings = Vec::with_capacity(n);
        for i in 0..n {
            rings.push(self.start_ring(i)?);
        }
        for (slot, r) in shared.slots.iter().zip(rings) {
            *lock(slot) = Some(r);
        }
        shared.pairs.store(self.pairs, Relaxed);
        Ok(())
    }

    /// Takes every ring out of service, stops it on the back-end and sets it up again from
    /// scratch. All of them, not just the one that went wrong: DPDK's vhost library takes a
    /// stopped ring (`GET_VRING_BASE`) as a stopped device, and its PMD then resumes only the
    /// rings that are set up again.
    fn reset(&mut self, shared: &Shared) -> Result<(), String> {
        shared.pairs.store(0, Relaxed);
        for s in shared.slots.iter() {
            lock(s).take();
        }
        for i in 0..2 * self.pairs {
            if self.features & F_PROTOCOL_FEATURES != 0 {
                self.fe
                    .set_vring_enable(i, false)
                    .map_err(proto("SET_VRING_ENABLE"))?;
            }
            self.fe.get_vring_base(i).map_err(proto("GET_VRING_BASE"))?;
        }
        self.start(shared)
    }
}
