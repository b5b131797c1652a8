//! Notice of the kernel's address and link changes, as they happen: an rtnetlink socket
//! subscribed to the link, IPv4 and IPv6 address groups. `ovs-vswitchd` learns its bridges'
//! addresses the same way (netlink notifications), so a tunnel routed through an address
//! given a moment ago (`ip addr add 172.16.0.101/24 dev br-mirror`) is routed at once,
//! not at the next poll. What changed is not parsed: the owner reads the addresses again
//! ([`crate::ifaddrs`]).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

const RTMGRP_LINK: u32 = 0x1;
const RTMGRP_IPV4_IFADDR: u32 = 0x10;
const RTMGRP_IPV6_IFADDR: u32 = 0x100;

/// A subscription to the kernel's link and address changes in the calling thread's network
/// namespace.
pub struct AddrWatch {
    fd: OwnedFd,
}

impl AddrWatch {
    /// Subscribes.
    pub fn open() -> io::Result<AddrWatch> {
        let fd = crate::bpf::netlink_socket()?;
        // SAFETY: an all-zero sockaddr_nl is valid; the fields set are plain integers.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        sa.nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
        // SAFETY: `sa` is a valid sockaddr_nl of the size passed, `fd` an open socket.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&raw const sa).cast::<libc::sockaddr>(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(AddrWatch { fd })
    }

    /// Waits (up to the socket's receive timeout, 2 s) for a change; whether one came. An
    /// overrun of the socket's buffer counts as a change (something was missed).
    pub fn wait(&self) -> bool {
        let mut buf = [0u8; 8192];
        // SAFETY: `buf` is valid for writes of its length; `fd` is an open socket.
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast::<libc::c_void>(),
                buf.len(),
                0,
            )
        };
        n > 0 || (n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOBUFS))
    }
}

/// Calls `on_change` from a thread of its own after every change of the kernel's links or
/// addresses (in the calling thread's network namespace), until `on_change` returns false.
pub fn spawn(mut on_change: impl FnMut() -> bool + Send + 'static) -> io::Result<()> {
    let w = AddrWatch::open()?;
    std::thread::Builder::new()
        .name("addr-watch".to_owned())
        .spawn(move || {
            loop {
                if w.wait() && !on_change() {
                    return;
                }
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_added_to_a_device_is_noticed() {
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root to add a veth pair");
            return;
        }
        let w = AddrWatch::open().unwrap();
        let name = format!("fpaw{}", std::process::id() % 100000);
        let peer = format!("{name}p");
        let ip = |args: &[&str]| {
            std::process::Command::new("ip")
                .args(args)
                .status()
                .unwrap()
                .success()
        };
        assert!(ip(&[
            "link", "add", &name, "type", "veth", "peer", "name", &peer
        ]));
        let _ = ip(&["addr", "add", "198.51.100.7/32", "dev", &name]);
        let seen = w.wait();
        let _ = ip(&["link", "del", &name]);
        assert!(seen);
    }
}
