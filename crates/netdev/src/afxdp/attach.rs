//! The XDP redirect program's attachment to the interface: in the mode `xdp_mode` asks
//! (native, else generic), replacing a program of ours that a crashed run left behind; and,
//! when the interface is deleted and comes back, the attachment brought in line with it (what
//! the port and its queues share).

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;
use std::time::Instant;

use super::error::{AFPACKET_HINT, FALLBACK_HINT, Fail};
use super::lock;
use super::options::{AfXdpOptions, XdpMode};
use crate::afpacket::RECHECK;
use crate::bpf::{self, AttachMode, XdpAttachment, XdpProgram, XskMap};

/// The program's attachment to the current instance of the interface.
pub(super) struct AttachState {
    pub(super) attachment: Option<XdpAttachment>,
    /// The interface instance the program is attached to; 0 while there is none.
    pub(super) ifindex: u32,
    /// Bumped whenever `ifindex` changes: sockets of an older generation are bound to an
    /// interface that is gone.
    pub(super) generation: u64,
    pub(super) mode: AttachMode,
    /// The port was dropped: nothing is attached or rebuilt any more.
    pub(super) closed: bool,
    /// After a failed attach: when the next one may be tried.
    pub(super) next_try: Instant,
}

/// What the port and its queues share.
pub(super) struct Shared {
    // Declared first: dropped (detached) before the program and the map.
    pub(super) state: Mutex<AttachState>,
    pub(super) map: XskMap,
    pub(super) prog: XdpProgram,
    pub(super) ifname: String,
    pub(super) opts: AfXdpOptions,
    /// A datagram socket in the interface's namespace, for ioctls by name.
    pub(super) ctl: OwnedFd,
}

impl Shared {
    /// Index of the interface that bears the name now, in its namespace (one `ioctl`).
    pub(super) fn lookup(&self) -> Option<u32> {
        crate::netns::ifindex(self.ctl.as_fd(), &self.ifname)
            .ok()
            .and_then(|i| u32::try_from(i).ok())
            .filter(|&i| i > 0)
    }

    /// Brings the attachment in line with the interface (slow path, taken by a queue whose
    /// socket failed or whose interface changed): when the instance the program is attached
    /// to is gone, the attachment is released and the generation bumped; when an interface
    /// of that name exists, the program is attached to it (inside the namespace, at most
    /// every [`RECHECK`] while that fails) and the generation bumped. Returns the generation,
    /// the interface index sockets are to be bound to (0: none) and the mode.
    pub(super) fn refresh(&self) -> (u64, u32, AttachMode) {
        let mut st = lock(&self.state);
        if st.closed {
            return (st.generation, 0, st.mode);
        }
        let cur = self.lookup();
        if cur == Some(st.ifindex) {
            return (st.generation, st.ifindex, st.mode);
        }
        if st.ifindex != 0 {
            // Released first: a new link cannot be made while the old one holds the program
            // (and a netlink attachment is detached from the old index, which is gone).
            st.attachment = None;
            st.ifindex = 0;
            st.generation += 1;
            // The sockets of the old instance receive nothing any more.
            for q in 0..self.opts.n_rxq as u32 {
                let _ = self.map.remove(q);
            }
        }
        let now = Instant::now();
        if let Some(i) = cur
            && now >= st.next_try
        {
            let xdp_mode = self.opts.xdp_mode;
            let attached = crate::netns::run_in_opt(self.opts.netns.as_deref(), || {
                Ok(attach_mode(&self.prog, i, &self.ifname, xdp_mode))
            });
            match attached {
                Ok(Ok((a, mode))) => {
                    st.attachment = Some(a);
                    st.mode = mode;
                    st.ifindex = i;
                    st.generation += 1;
                }
                _ => st.next_try = now + RECHECK,
            }
        }
        (st.generation, st.ifindex, st.mode)
    }
}

pub(super) fn mode_name(m: AttachMode) -> &'static str {
    match m {
        AttachMode::Native => "native",
        AttachMode::Generic => "generic",
    }
}

/// Attaches `prog` in `mode`, replacing a program of ours left over by a crashed run.
fn attach_replacing(
    prog: &XdpProgram,
    ifindex: u32,
    ifname: &str,
    mode: AttachMode,
) -> Result<XdpAttachment, Fail> {
    let mut replaced = false;
    loop {
        match bpf::attach(prog, ifindex, mode) {
            Ok(a) => return Ok(a),
            Err(e) if !replaced && matches!(e.errno(), Some(libc::EBUSY | libc::EEXIST)) => {
                let Ok(Some((id, old_mode))) = bpf::attached_program(ifindex) else {
                    return Err(Fail::bpf(&e, FALLBACK_HINT));
                };
                let name = bpf::program_name(id).unwrap_or_default();
                if name != bpf::PROG_NAME {
                    return Err(Fail {
                        msg: format!(
                            "another XDP program ('{name}', id {id}, {} mode) is attached to \
                             {ifname}; remove it with `ip link set dev {ifname} {} off` if it \
                             is not in use",
                            mode_name(old_mode),
                            if old_mode == AttachMode::Native {
                                "xdpdrv"
                            } else {
                                "xdpgeneric"
                            },
                        ),
                        errno: e.errno(),
                        unsupported: false,
                    });
                }
                // Ours: attached with netlink by a run that crashed (a link would have gone
                // with its process). Detach it and try again. If a live process holds it
                // through a link, netlink cannot detach it: say so.
                if let Err(d) = bpf::detach_netlink(ifindex, old_mode) {
                    return Err(Fail {
                        msg: format!(
                            "{ifname} already has flowpath's XDP program (id {id}) attached and \
                             it could not be detached ({d}): is another switch using it?"
                        ),
                        errno: d.errno(),
                        unsupported: false,
                    });
                }
                replaced = true;
            }
            Err(e) => return Err(Fail::bpf(&e, "")),
        }
    }
}

/// Attaches `prog` to `ifindex` as `xdp_mode` asks (`best`: native, else generic); returns the
/// attachment and the mode it got.
pub(super) fn attach_mode(
    prog: &XdpProgram,
    ifindex: u32,
    ifname: &str,
    xdp_mode: XdpMode,
) -> Result<(XdpAttachment, AttachMode), Fail> {
    let enospc = |mut f: Fail| {
        if f.errno == Some(libc::ENOSPC) {
            f.msg.push_str(
                " (veth: native XDP needs at least as many rx queues on this end as the peer \
                 has tx queues; see `ethtool -l`, `ethtool -L IF rx N`)",
            );
        }
        f
    };
    let attach = |mode| attach_replacing(prog, ifindex, ifname, mode).map_err(enospc);
    let in_mode = |mode, hint: &str, f: Fail| Fail {
        msg: format!(
            "cannot attach XDP in {} mode to {ifname}: {}{hint}",
            mode_name(mode),
            f.msg
        ),
        ..f
    };
    Ok(match xdp_mode {
        XdpMode::Native => (
            attach(AttachMode::Native)
                .map_err(|f| in_mode(AttachMode::Native, FALLBACK_HINT, f))?,
            AttachMode::Native,
        ),
        XdpMode::Generic => (
            attach(AttachMode::Generic)
                .map_err(|f| in_mode(AttachMode::Generic, AFPACKET_HINT, f))?,
            AttachMode::Generic,
        ),
        XdpMode::Best => match attach(AttachMode::Native) {
            Ok(a) => (a, AttachMode::Native),
            Err(native) => match attach(AttachMode::Generic) {
                Ok(a) => (a, AttachMode::Generic),
                Err(f) => {
                    return Err(Fail {
                        msg: format!(
                            "cannot attach XDP to {ifname}: native mode: {}; generic mode: \
                             {}{AFPACKET_HINT}",
                            native.msg, f.msg
                        ),
                        ..f
                    });
                }
            },
        },
    })
}
