//! Just enough eBPF for the AF_XDP port, without clang or libbpf: the redirect program
//! assembled here, an `XSKMAP`, loading through the `bpf(2)` system call, and attaching to an
//! interface.
//!
//! The program is the classic AF_XDP one:
//!
//! ```c
//! return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
//! ```
//!
//! A packet whose receive queue has a socket in the map goes to that socket; a packet of a
//! queue with no socket in the map goes on to the kernel stack: the low bits of the helper's
//! flags are the action returned when the lookup fails (kernel 5.3+). A packet whose socket
//! cannot take it (rx ring full, no fill frame) is dropped by the redirect and counted in
//! that socket's `XDP_STATISTICS`.
//!
//! Attaching prefers a BPF link (`BPF_LINK_CREATE` with `BPF_XDP`, kernel 5.9+): the program
//! stays attached exactly as long as the link's file descriptor is open, so a process that
//! crashes leaves nothing behind and a restarted switch can attach again. On older kernels it
//! falls back to netlink (`IFLA_XDP`), where an attachment outlives the process; the
//! [`XdpAttachment`] detaches it on drop, and [`attached_program`] / [`program_name`] let the
//! caller recognise one left over by a crashed run.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `enum bpf_cmd` values used here.
const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_MAP_DELETE_ELEM: libc::c_int = 3;
const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_PROG_GET_FD_BY_ID: libc::c_int = 13;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_int = 15;
const BPF_LINK_CREATE: libc::c_int = 28;
const BPF_LINK_DETACH: libc::c_int = 34;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`: `BPF_XDP`.
const BPF_XDP: u32 = 37;
/// `BPF_FUNC_redirect_map`.
const FUNC_REDIRECT_MAP: i32 = 51;
/// `src_reg` of a 64-bit immediate load that names a map by file descriptor.
const BPF_PSEUDO_MAP_FD: u8 = 1;

/// `XDP_PASS`.
pub const XDP_PASS: i32 = 2;

/// `XDP_FLAGS_*` (linux/if_link.h).
pub const XDP_FLAGS_UPDATE_IF_NOEXIST: u32 = 1 << 0;
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// Name the program is loaded under (as `bpftool prog` and `ip link` show it).
pub const PROG_NAME: &str = "flowpath_xsk";

/// An eBPF instruction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    pub code: u8,
    /// Destination register in the low nibble, source register in the high one (the other
    /// way round on big-endian targets).
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        // `struct bpf_insn` has `dst_reg:4, src_reg:4` bit-fields: the first is the low
        // nibble on little-endian targets, the high one on big-endian ones.
        let regs = if cfg!(target_endian = "little") {
            ((src & 0xf) << 4) | (dst & 0xf)
        } else {
            ((dst & 0xf) << 4) | (src & 0xf)
        };
        Insn {
            code,
            regs,
            off,
            imm,
        }
    }

    /// `dst = *(u32 *)(src + off)` (BPF_LDX | BPF_MEM | BPF_W).
    pub const fn load_u32(dst: u8, src: u8, off: i16) -> Insn {
        Insn::new(0x61, dst, src, off, 0)
    }

    /// `dst = imm` (BPF_ALU64 | BPF_MOV | BPF_K).
    pub const fn mov64_imm(dst: u8, imm: i32) -> Insn {
        Insn::new(0xb7, dst, 0, 0, imm)
    }

    /// `dst = map` by file descriptor: the two halves of a 64-bit immediate load
    /// (BPF_LD | BPF_DW | BPF_IMM) with `src = BPF_PSEUDO_MAP_FD`.
    pub const fn load_map_fd(dst: u8, fd: i32) -> [Insn; 2] {
        [
            Insn::new(0x18, dst, BPF_PSEUDO_MAP_FD, 0, fd),
            Insn::new(0, 0, 0, 0, 0),
        ]
    }

    /// Calls helper `func` (BPF_JMP | BPF_CALL).
    pub const fn call(func: i32) -> Insn {
        Insn::new(0x85, 0, 0, 0, func)
    }

    /// Returns `r0` (BPF_JMP | BPF_EXIT).
    pub const fn exit() -> Insn {
        Insn::new(0x95, 0, 0, 0, 0)
    }
}

/// Offset of `rx_queue_index` in `struct xdp_md`.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

/// The redirect program for the map with file descriptor `map_fd`.
pub fn redirect_program(map_fd: i32) -> Vec<Insn> {
    let mut p = Vec::with_capacity(6);
    // r2 = ctx->rx_queue_index (r1 is the context on entry).
    p.push(Insn::load_u32(2, 1, XDP_MD_RX_QUEUE_INDEX));
    // r1 = &xsks_map
    p.extend(Insn::load_map_fd(1, map_fd));
    // r3 = XDP_PASS: the action when the map has no socket for the queue.
    p.push(Insn::mov64_imm(3, XDP_PASS));
    p.push(Insn::call(FUNC_REDIRECT_MAP));
    p.push(Insn::exit());
    p
}

/// A failed eBPF or netlink operation: what was attempted and the kernel's answer.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct BpfError {
    pub what: String,
    #[source]
    pub source: io::Error,
}

impl BpfError {
    fn new(what: impl Into<String>, source: io::Error) -> BpfError {
        BpfError {
            what: what.into(),
            source,
        }
    }

    /// The kernel's errno.
    pub fn errno(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
}

/// `bpf(cmd, attr, sizeof attr)`.
///
/// # Safety
/// `attr` must be the `repr(C)` attribute block of `cmd` (all bytes initialised, padding
/// included, so that the kernel's zero checks pass), and every user pointer in it must point
/// to memory valid for what `cmd` does with it for the duration of the call: readable for
/// the lengths given (keys, values, instructions, license), writable for the lengths given
/// (verifier log, object info).
unsafe fn sys_bpf<T>(cmd: libc::c_int, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live attribute block of the size passed, and the buffers it points
    // to are valid as the kernel uses them (the caller's contract).
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// [`sys_bpf`] for a command that returns a new file descriptor.
///
/// # Safety
/// As for [`sys_bpf`]; and `cmd` must be a command whose non-negative result is a new file
/// descriptor (map or program creation, link creation, get-fd-by-id).
unsafe fn sys_bpf_fd<T>(cmd: libc::c_int, attr: &mut T) -> io::Result<OwnedFd> {
    // SAFETY: the caller's contract.
    let r = unsafe { sys_bpf(cmd, attr) }?;
    let fd = RawFd::try_from(r).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: `fd` is a descriptor the kernel just created for us (the caller's contract on
    // `cmd`); nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn obj_name(s: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    for (d, b) in n.iter_mut().zip(s.bytes().take(15)) {
        *d = b;
    }
    n
}

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct GetFdByIdAttr {
    id: u32,
    next_id: u32,
    open_flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

// The attribute blocks against `union bpf_attr` (linux/bpf.h): sizes (no implicit padding,
// so every byte passed is initialised) and the offsets of their fields.
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<MapCreateAttr>() == 44);
    assert!(offset_of!(MapCreateAttr, max_entries) == 12);
    assert!(offset_of!(MapCreateAttr, numa_node) == 24);
    assert!(offset_of!(MapCreateAttr, map_name) == 28);
    assert!(size_of::<MapElemAttr>() == 32);
    assert!(offset_of!(MapElemAttr, key) == 8);
    assert!(offset_of!(MapElemAttr, value) == 16);
    assert!(offset_of!(MapElemAttr, flags) == 24);
    assert!(size_of::<ProgLoadAttr>() == 72);
    assert!(offset_of!(ProgLoadAttr, insns) == 8);
    assert!(offset_of!(ProgLoadAttr, license) == 16);
    assert!(offset_of!(ProgLoadAttr, log_level) == 24);
    assert!(offset_of!(ProgLoadAttr, log_buf) == 32);
    assert!(offset_of!(ProgLoadAttr, kern_version) == 40);
    assert!(offset_of!(ProgLoadAttr, prog_name) == 48);
    assert!(offset_of!(ProgLoadAttr, prog_ifindex) == 64);
    assert!(offset_of!(ProgLoadAttr, expected_attach_type) == 68);
    assert!(size_of::<LinkCreateAttr>() == 16);
    assert!(offset_of!(LinkCreateAttr, target_ifindex) == 4);
    assert!(offset_of!(LinkCreateAttr, attach_type) == 8);
    assert!(offset_of!(LinkCreateAttr, flags) == 12);
    assert!(size_of::<GetFdByIdAttr>() == 12);
    assert!(size_of::<InfoAttr>() == 16);
    assert!(offset_of!(InfoAttr, info) == 8);
    assert!(size_of::<Insn>() == 8);
};

/// A `BPF_MAP_TYPE_XSKMAP`: queue id → AF_XDP socket.
#[derive(Debug)]
pub struct XskMap {
    fd: OwnedFd,
    max_entries: u32,
}

impl XskMap {
    /// A map for queue ids `0..max_entries`.
    pub fn create(max_entries: u32) -> Result<XskMap, BpfError> {
        let mut a = MapCreateAttr {
            map_type: BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: max_entries.max(1),
            map_name: obj_name("flowpath_xsks"),
            ..Default::default()
        };
        // SAFETY: a MAP_CREATE attribute block with no pointers; the command returns a
        // new map descriptor.
        let fd = unsafe { sys_bpf_fd(BPF_MAP_CREATE, &mut a) }
            .map_err(|e| BpfError::new("bpf(BPF_MAP_CREATE, XSKMAP)", e))?;
        Ok(XskMap {
            fd,
            max_entries: a.max_entries,
        })
    }

    /// `BPF_MAP_UPDATE_ELEM` (with `value`) or `BPF_MAP_DELETE_ELEM` (without) of key `qid`.
    fn elem(&self, qid: u32, value: Option<u32>) -> Result<(), BpfError> {
        let (cmd, name) = match value {
            Some(_) => (BPF_MAP_UPDATE_ELEM, "BPF_MAP_UPDATE_ELEM"),
            None => (BPF_MAP_DELETE_ELEM, "BPF_MAP_DELETE_ELEM"),
        };
        let mut a = MapElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            key: &qid as *const u32 as u64,
            value: value.as_ref().map_or(0, |v| v as *const u32 as u64),
            flags: 0, // BPF_ANY
            ..Default::default()
        };
        // SAFETY: `key` and `value` point to `u32`s (the map's key and value size) that live
        // across the call; the kernel only reads them.
        unsafe { sys_bpf(cmd, &mut a) }
            .map(drop)
            .map_err(|e| BpfError::new(format!("bpf({name}, queue {qid})"), e))
    }

    /// Sends queue `qid`'s packets to the AF_XDP socket `xsk_fd`.
    pub fn set(&self, qid: u32, xsk_fd: RawFd) -> Result<(), BpfError> {
        self.elem(qid, Some(xsk_fd as u32))
    }

    /// Removes queue `qid`'s socket (its packets go to the kernel stack again).
    pub fn remove(&self, qid: u32) -> Result<(), BpfError> {
        self.elem(qid, None)
    }

    /// Number of queue ids the map covers.
    pub fn max_entries(&self) -> u32 {
        self.max_entries
    }

    /// The map's file descriptor.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A loaded XDP program.
#[derive(Debug)]
pub struct XdpProgram {
    fd: OwnedFd,
}

impl XdpProgram {
    /// Loads `insns` as an XDP program named `name` (at most 15 bytes kept). On failure the
    /// error carries the verifier's log.
    pub fn load(name: &str, insns: &[Insn]) -> Result<XdpProgram, BpfError> {
        let license = c"GPL";
        let attr = |log: Option<&mut [u8]>| {
            let mut a = ProgLoadAttr {
                prog_type: BPF_PROG_TYPE_XDP,
                insn_cnt: u32::try_from(insns.len()).unwrap_or(u32::MAX),
                insns: insns.as_ptr() as u64,
                license: license.as_ptr() as u64,
                prog_name: obj_name(name),
                ..Default::default()
            };
            if let Some(log) = log {
                a.log_level = 1;
                a.log_size = u32::try_from(log.len()).unwrap_or(u32::MAX);
                a.log_buf = log.as_mut_ptr() as u64;
            }
            // SAFETY: `insns` points to `insn_cnt` instructions, `license` to a NUL-terminated
            // string, `log_buf` (when set) to `log_size` writable bytes, all alive across the
            // call; PROG_LOAD returns a new program descriptor.
            unsafe { sys_bpf_fd(BPF_PROG_LOAD, &mut a) }
        };
        match attr(None) {
            Ok(fd) => Ok(XdpProgram { fd }),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(BpfError::new(
                "bpf(BPF_PROG_LOAD, XDP) not permitted (needs root or CAP_BPF+CAP_NET_ADMIN)",
                e,
            )),
            Err(e) => {
                // Again with the verifier's log, for the error message.
                let mut log = vec![0u8; 64 * 1024];
                let _ = attr(Some(&mut log));
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let text = String::from_utf8_lossy(&log[..end]).trim().to_owned();
                Err(BpfError::new(
                    format!("bpf(BPF_PROG_LOAD, XDP) rejected; verifier log: [{text}]"),
                    e,
                ))
            }
        }
    }

    /// The redirect program over `map` (see the module documentation), named [`PROG_NAME`].
    pub fn load_redirect(map: &XskMap) -> Result<XdpProgram, BpfError> {
        XdpProgram::load(PROG_NAME, &redirect_program(map.fd()))
    }

    /// The program's file descriptor.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// How an XDP program is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachMode {
    /// In the driver (`XDP_FLAGS_DRV_MODE`).
    Native,
    /// On the generic path, after the skb is built (`XDP_FLAGS_SKB_MODE`).
    Generic,
}

impl AttachMode {
    /// The `XDP_FLAGS_*` mode bit.
    pub fn flags(self) -> u32 {
        match self {
            AttachMode::Native => XDP_FLAGS_DRV_MODE,
            AttachMode::Generic => XDP_FLAGS_SKB_MODE,
        }
    }
}

/// An attached program; detached on drop.
#[derive(Debug)]
pub enum XdpAttachment {
    /// A BPF link: closing it detaches.
    Link(OwnedFd),
    /// Attached with netlink: detached with netlink on drop, through the socket given (opened
    /// in the interface's network namespace).
    Netlink {
        nl: OwnedFd,
        ifindex: u32,
        flags: u32,
    },
}

impl XdpAttachment {
    /// Whether this is a BPF link (rather than a netlink attachment).
    pub fn is_link(&self) -> bool {
        matches!(self, XdpAttachment::Link(_))
    }
}

/// `bpf_attr` for `BPF_LINK_DETACH`.
#[repr(C)]
struct LinkDetachAttr {
    link_fd: u32,
}

impl Drop for XdpAttachment {
    fn drop(&mut self) {
        match self {
            // Closing the link's descriptor detaches the program only when the kernel gets to
            // releasing the link (deferred work): detach now, so that a port reopened right
            // after (a restart) finds the interface free and `ip link` shows no program.
            XdpAttachment::Link(fd) => {
                let mut a = LinkDetachAttr {
                    link_fd: fd.as_raw_fd() as u32,
                };
                // SAFETY: a LINK_DETACH attribute block with no pointers, naming our own live
                // link descriptor; the command writes nothing back.
                let _ = unsafe { sys_bpf(BPF_LINK_DETACH, &mut a) };
            }
            XdpAttachment::Netlink { nl, ifindex, flags } => {
                let _ = netlink_set_xdp(nl.as_raw_fd(), *ifindex, -1, *flags);
            }
        }
    }
}

/// Attaches `prog` to interface `ifindex` (of the calling thread's network namespace) in
/// `mode`: with a BPF link, or with netlink where the kernel has no XDP links.
pub fn attach(
    prog: &XdpProgram,
    ifindex: u32,
    mode: AttachMode,
) -> Result<XdpAttachment, BpfError> {
    let mut a = LinkCreateAttr {
        prog_fd: prog.fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags: mode.flags(),
    };
    // SAFETY: a LINK_CREATE attribute block with no pointers; the command returns a new link
    // descriptor.
    match unsafe { sys_bpf_fd(BPF_LINK_CREATE, &mut a) } {
        Ok(fd) => Ok(XdpAttachment::Link(fd)),
        // EINVAL: no BPF_LINK_CREATE or no XDP links (kernel < 5.9): use netlink.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => attach_netlink(prog, ifindex, mode),
        Err(e) => Err(BpfError::new(
            format!("bpf(BPF_LINK_CREATE, BPF_XDP, {mode:?}) on ifindex {ifindex}"),
            e,
        )),
    }
}

/// Attaches `prog` with netlink (`IFLA_XDP`, `XDP_FLAGS_UPDATE_IF_NOEXIST`): what [`attach`]
/// falls back to on kernels without XDP links. The attachment outlives the process unless
/// dropped.
pub fn attach_netlink(
    prog: &XdpProgram,
    ifindex: u32,
    mode: AttachMode,
) -> Result<XdpAttachment, BpfError> {
    let nl = nl_socket()?;
    let flags = mode.flags() | XDP_FLAGS_UPDATE_IF_NOEXIST;
    netlink_set_xdp(nl.as_raw_fd(), ifindex, prog.fd(), flags).map_err(|e| {
        BpfError::new(
            format!("attach XDP ({mode:?}) with netlink IFLA_XDP to ifindex {ifindex}"),
            e,
        )
    })?;
    // Detaching must not carry UPDATE_IF_NOEXIST.
    Ok(XdpAttachment::Netlink {
        nl,
        ifindex,
        flags: mode.flags(),
    })
}

/// The program attached to `ifindex` (calling thread's namespace), if any: its id and the
/// mode it runs in.
pub fn attached_program(ifindex: u32) -> Result<Option<(u32, AttachMode)>, BpfError> {
    let nl = nl_socket()?;
    netlink_get_xdp(nl.as_raw_fd(), ifindex)
        .map_err(|e| BpfError::new(format!("netlink RTM_GETLINK ifindex {ifindex}"), e))
}

/// Detaches with netlink whatever program is attached to `ifindex` in `mode` (fails with
/// EBUSY if it is attached through a BPF link, which only its owner can release).
pub fn detach_netlink(ifindex: u32, mode: AttachMode) -> Result<(), BpfError> {
    let nl = nl_socket()?;
    netlink_set_xdp(nl.as_raw_fd(), ifindex, -1, mode.flags())
        .map_err(|e| BpfError::new(format!("detach XDP from ifindex {ifindex}"), e))
}

/// The name of the loaded program with id `id`.
pub fn program_name(id: u32) -> Result<String, BpfError> {
    let mut a = GetFdByIdAttr {
        id,
        ..Default::default()
    };
    // SAFETY: a GET_FD_BY_ID attribute block with no pointers; the command returns a new
    // program descriptor.
    let fd = unsafe { sys_bpf_fd(BPF_PROG_GET_FD_BY_ID, &mut a) }
        .map_err(|e| BpfError::new(format!("bpf(BPF_PROG_GET_FD_BY_ID, {id})"), e))?;
    // struct bpf_prog_info: 232 bytes in recent kernels, `name[16]` at offset 64. Older kernels
    // fill what they know and shorten info_len; the bytes we pass beyond what the kernel knows
    // are zero, as it requires. All its pointer fields are zero with zero lengths, so the
    // kernel writes nothing else.
    let mut info = [0u8; 232];
    let mut a = InfoAttr {
        bpf_fd: fd.as_raw_fd() as u32,
        info_len: info.len() as u32,
        info: info.as_mut_ptr() as u64,
    };
    // SAFETY: `info` points to `info_len` writable bytes alive across the call.
    unsafe { sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut a) }
        .map_err(|e| BpfError::new(format!("bpf(BPF_OBJ_GET_INFO_BY_FD, prog {id})"), e))?;
    if (a.info_len as usize) < 80 {
        return Ok(String::new());
    }
    let name = &info[64..80];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

// ---- netlink (rtnetlink) -------------------------------------------------------------------

const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_MULTI: u16 = 2;
const NLM_F_ACK: u16 = 4;
const NLA_F_NESTED: u16 = 1 << 15;
const IFLA_XDP: u16 = 43;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_PROG_ID: u16 = 4;
const IFLA_XDP_DRV_PROG_ID: u16 = 5;
const IFLA_XDP_SKB_PROG_ID: u16 = 6;
const XDP_ATTACHED_DRV: u8 = 1;
const XDP_ATTACHED_SKB: u8 = 2;

/// [`netlink_socket`], as a [`BpfError`].
fn nl_socket() -> Result<OwnedFd, BpfError> {
    netlink_socket().map_err(|e| BpfError::new("netlink socket", e))
}

/// A rtnetlink socket in the calling thread's network namespace.
pub fn netlink_socket() -> io::Result<OwnedFd> {
    let fd = crate::netns::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE)?;
    // Replies never block forever: the kernel answers at once, but be safe.
    let tv = libc::timeval {
        tv_sec: 2,
        tv_usec: 0,
    };
    // SAFETY: `tv` is a valid timeval of the size passed.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const libc::timeval as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
    }
    Ok(fd)
}

fn push_attr(msg: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    msg.extend_from_slice(&(len as u16).to_ne_bytes());
    msg.extend_from_slice(&ty.to_ne_bytes());
    msg.extend_from_slice(payload);
    while !msg.len().is_multiple_of(4) {
        msg.push(0);
    }
}

/// A link message: header, `ifinfomsg` for `ifindex`, then `attrs`.
fn link_msg(ty: u16, flags: u16, ifindex: u32, attrs: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(32 + attrs.len());
    let len = 16 + 16 + attrs.len();
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&ty.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel
    // struct ifinfomsg
    m.push(libc::AF_UNSPEC as u8);
    m.push(0);
    m.extend_from_slice(&0u16.to_ne_bytes());
    m.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(attrs);
    m
}

fn nl_send(fd: RawFd, msg: &[u8]) -> io::Result<()> {
    // SAFETY: `msg` is a valid buffer of the length passed; a null address sends to the kernel
    // (the socket is unconnected netlink, which defaults to the kernel as destination).
    let r = unsafe { libc::send(fd, msg.as_ptr() as *const libc::c_void, msg.len(), 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn nl_recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a valid writable buffer of the length passed.
    let r = unsafe { libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_ne_bytes([b[o], b[o + 1]])
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// Walks the netlink messages of one reply; calls `f` on each non-control message. Returns
/// when an error/ack or DONE message ends the reply, or after a message that is not part of a
/// multipart reply (a GETLINK for one interface answers with its message alone).
fn nl_reply(fd: RawFd, mut f: impl FnMut(u16, &[u8])) -> io::Result<()> {
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = nl_recv(fd, &mut buf)?;
        let mut o = 0;
        while o + 16 <= n {
            let len = u32_at(&buf, o) as usize;
            let ty = u16_at(&buf, o + 4);
            let multi = u16_at(&buf, o + 6) & NLM_F_MULTI != 0;
            if len < 16 || o + len > n {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "short netlink message",
                ));
            }
            let body = &buf[o + 16..o + len];
            match ty {
                NLMSG_ERROR => {
                    let code = if body.len() >= 4 {
                        u32_at(body, 0) as i32
                    } else {
                        0
                    };
                    return if code == 0 {
                        Ok(())
                    } else {
                        Err(io::Error::from_raw_os_error(-code))
                    };
                }
                NLMSG_DONE => return Ok(()),
                _ => {
                    f(ty, body);
                    if !multi {
                        return Ok(());
                    }
                }
            }
            o += (len + 3) & !3;
        }
    }
}

fn netlink_set_xdp(nl: RawFd, ifindex: u32, prog_fd: RawFd, flags: u32) -> io::Result<()> {
    let mut inner = Vec::new();
    push_attr(&mut inner, IFLA_XDP_FD, &prog_fd.to_ne_bytes());
    push_attr(&mut inner, IFLA_XDP_FLAGS, &flags.to_ne_bytes());
    let mut attrs = Vec::new();
    push_attr(&mut attrs, IFLA_XDP | NLA_F_NESTED, &inner);
    nl_send(
        nl,
        &link_msg(RTM_SETLINK, NLM_F_REQUEST | NLM_F_ACK, ifindex, &attrs),
    )?;
    nl_reply(nl, |_, _| {})
}

/// Iterates the attributes in `b`.
fn attrs(b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut o = 0;
    std::iter::from_fn(move || {
        if o + 4 > b.len() {
            return None;
        }
        let len = u16_at(b, o) as usize;
        let ty = u16_at(b, o + 2) & !NLA_F_NESTED;
        if len < 4 || o + len > b.len() {
            return None;
        }
        let payload = &b[o + 4..o + len];
        o += (len + 3) & !3;
        Some((ty, payload))
    })
}

fn netlink_get_xdp(nl: RawFd, ifindex: u32) -> io::Result<Option<(u32, AttachMode)>> {
    nl_send(nl, &link_msg(RTM_GETLINK, NLM_F_REQUEST, ifindex, &[]))?;
    let mut found = None;
    let r = nl_reply(nl, |ty, body| {
        if ty != RTM_NEWLINK || body.len() < 16 {
            return;
        }
        for (t, p) in attrs(&body[16..]) {
            if t != IFLA_XDP {
                continue;
            }
            let (mut attached, mut id, mut drv_id, mut skb_id) = (0u8, 0u32, 0u32, 0u32);
            for (t, p) in attrs(p) {
                match t {
                    IFLA_XDP_ATTACHED if !p.is_empty() => attached = p[0],
                    IFLA_XDP_PROG_ID if p.len() >= 4 => id = u32_at(p, 0),
                    IFLA_XDP_DRV_PROG_ID if p.len() >= 4 => drv_id = u32_at(p, 0),
                    IFLA_XDP_SKB_PROG_ID if p.len() >= 4 => skb_id = u32_at(p, 0),
                    _ => {}
                }
            }
            found = match attached {
                XDP_ATTACHED_DRV if id != 0 => Some((id, AttachMode::Native)),
                XDP_ATTACHED_SKB if id != 0 => Some((id, AttachMode::Generic)),
                // Several modes at once: report the driver's first.
                _ if drv_id != 0 => Some((drv_id, AttachMode::Native)),
                _ if skb_id != 0 => Some((skb_id, AttachMode::Generic)),
                _ => None,
            };
        }
    });
    r.map(|()| found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_encoding() {
        let p = redirect_program(7);
        let raw: Vec<u64> = p
            .iter()
            .map(|i| {
                u64::from_le_bytes([
                    i.code,
                    i.regs,
                    i.off.to_le_bytes()[0],
                    i.off.to_le_bytes()[1],
                    i.imm.to_le_bytes()[0],
                    i.imm.to_le_bytes()[1],
                    i.imm.to_le_bytes()[2],
                    i.imm.to_le_bytes()[3],
                ])
            })
            .collect();
        assert_eq!(p.len(), 6);
        assert_eq!(std::mem::size_of::<Insn>(), 8);
        // ldxw r2, [r1+16]
        assert_eq!(raw[0], 0x0000_0000_0010_1261);
        // lddw r1, map fd 7 (src = 1)
        assert_eq!(raw[1], 0x0000_0007_0000_1118);
        assert_eq!(raw[2], 0);
        // mov r3, 2; call 51; exit
        assert_eq!(raw[3], 0x0000_0002_0000_03b7);
        assert_eq!(raw[4], 0x0000_0033_0000_0085);
        assert_eq!(raw[5], 0x95);
    }
}
