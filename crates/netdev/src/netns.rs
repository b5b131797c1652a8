//! Network namespaces and interfaces by name, for the kernel port backends.
//!
//! A socket or a `/dev/net/tun` file belongs to the network namespace of the thread that
//! created it, and keeps working from any namespace once open. So a backend whose interface
//! lives in a named namespace (`ip netns add NAME`, which bind-mounts it on
//! `/run/netns/NAME`) opens its descriptors through [`run_in`]: the closure runs on a
//! short-lived thread that has joined the namespace with `setns(2)`, and what it returns (an
//! [`OwnedFd`]) is handed back. The calling thread never changes namespace.
//!
//! The interface helpers ([`ifindex`], [`if_flags`], [`set_up`], [`is_running`], [`set_mac`],
//! [`set_ipv4`]) take any socket and act in that socket's namespace, which is how a queue
//! checks on its interface from a PMD thread in the root namespace.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

/// Where `ip netns` keeps the namespace named `name`.
pub fn path(name: &str) -> PathBuf {
    PathBuf::from("/run/netns").join(name)
}

/// Runs `f` on a thread inside network namespace `name` (`/run/netns/NAME`) and returns its
/// result. Slow (a thread per call): for opening descriptors, not for the packet path.
pub fn run_in<T: Send>(name: &str, f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad network namespace name '{name}'"),
        ));
    }
    let ns = File::open(path(name)).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("network namespace '{name}' (/run/netns/{name}): {e}"),
        )
    })?;
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("netns-open".into())
            .spawn_scoped(s, || {
                // SAFETY: `ns` is an open namespace file; setns only changes this thread's
                // network namespace, and the thread ends after `f`.
                if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    let e = io::Error::last_os_error();
                    return Err(io::Error::new(
                        e.kind(),
                        format!("entering network namespace '{name}': {e}"),
                    ));
                }
                f()
            })?
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("namespace thread panicked")))
    })
}

/// [`run_in`] when `netns` is given, else `f` on this thread.
pub fn run_in_opt<T: Send>(
    netns: Option<&str>,
    f: impl FnOnce() -> io::Result<T> + Send,
) -> io::Result<T> {
    match netns {
        Some(n) => run_in(n, f),
        None => f(),
    }
}

/// A new socket in the current thread's namespace (close-on-exec).
pub fn socket(domain: i32, ty: i32, proto: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the result is checked before it is owned.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A datagram socket in namespace `netns` (or this one) for interface ioctls.
pub fn control_socket(netns: Option<&str>) -> io::Result<OwnedFd> {
    run_in_opt(netns, || socket(libc::AF_INET, libc::SOCK_DGRAM, 0))
}

/// An `ifreq` naming `name`; an error for a name the kernel cannot hold.
pub(crate) fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    let c = CString::new(name).map_err(|_| bad_name(name))?;
    let bytes = c.as_bytes_with_nul();
    if bytes.len() > libc::IFNAMSIZ || bytes.len() < 2 {
        return Err(bad_name(name));
    }
    // SAFETY: ifreq is plain old data (a name and a union of integers and pointers) for which
    // all-zero bytes are a valid value.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in r.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(r)
}

/// Checks an interface name (what the kernel can hold: 1 to 15 bytes, no NUL, `/` or
/// whitespace) and a namespace name (a file in `/run/netns`), without touching the system.
pub fn check_names(ifname: &str, netns: Option<&str>) -> Result<(), String> {
    if ifname.is_empty()
        || ifname.len() > libc::IFNAMSIZ - 1
        || ifname.contains(['/', '\0'])
        || ifname.contains(char::is_whitespace)
        || ifname == "."
        || ifname == ".."
    {
        return Err(bad_name(ifname).to_string());
    }
    if let Some(n) = netns
        && (n.is_empty() || n.contains(['/', '\0']) || n == "." || n == "..")
    {
        return Err(format!(
            "bad network namespace name '{n}' (a name under /run/netns)"
        ));
    }
    Ok(())
}

fn bad_name(name: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("bad interface name '{name}' (1 to 15 bytes, no NUL)"),
    )
}

fn ioctl(sock: BorrowedFd<'_>, req: libc::Ioctl, r: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: every request used here (SIOCGIFINDEX, SIOCGIFFLAGS, SIOCSIFFLAGS,
    // SIOCSIFHWADDR, SIOCSIFADDR, SIOCSIFNETMASK) reads and writes one `ifreq`, which `r` is.
    if unsafe { libc::ioctl(sock.as_raw_fd(), req, r as *mut libc::ifreq) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Index of interface `name` in `sock`'s namespace.
pub fn ifindex(sock: BorrowedFd<'_>, name: &str) -> io::Result<i32> {
    let mut r = ifreq(name)?;
    ioctl(sock, libc::SIOCGIFINDEX, &mut r)?;
    // SAFETY: SIOCGIFINDEX filled the union's ifindex member.
    Ok(unsafe { r.ifr_ifru.ifru_ifindex })
}

/// `IFF_*` flags of interface `name` in `sock`'s namespace.
pub fn if_flags(sock: BorrowedFd<'_>, name: &str) -> io::Result<i32> {
    let mut r = ifreq(name)?;
    ioctl(sock, libc::SIOCGIFFLAGS, &mut r)?;
    // SAFETY: SIOCGIFFLAGS filled the union's flags member.
    Ok(i32::from(unsafe { r.ifr_ifru.ifru_flags }) & 0xffff)
}

/// Sets interface `name` administratively up.
pub fn set_up(sock: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    let flags = if_flags(sock, name)?;
    if flags & libc::IFF_UP != 0 {
        return Ok(());
    }
    let mut r = ifreq(name)?;
    r.ifr_ifru.ifru_flags = (flags | libc::IFF_UP) as libc::c_short;
    ioctl(sock, libc::SIOCSIFFLAGS, &mut r)
}

/// Whether interface `name` exists in `sock`'s namespace, is up and has carrier.
pub fn is_running(sock: BorrowedFd<'_>, name: &str) -> bool {
    if_flags(sock, name)
        .is_ok_and(|f| f & (libc::IFF_UP | libc::IFF_RUNNING) == libc::IFF_UP | libc::IFF_RUNNING)
}

/// Sets the Ethernet address of interface `name` in `sock`'s namespace.
pub fn set_mac(sock: BorrowedFd<'_>, name: &str, mac: [u8; 6]) -> io::Result<()> {
    let mut r = ifreq(name)?;
    // SAFETY: writes the hwaddr member of the union, a plain sockaddr.
    let sa = unsafe { &mut r.ifr_ifru.ifru_hwaddr };
    sa.sa_family = libc::ARPHRD_ETHER;
    for (d, s) in sa.sa_data.iter_mut().zip(mac) {
        *d = s as libc::c_char;
    }
    ioctl(sock, libc::SIOCSIFHWADDR, &mut r)
}

/// Sets the IPv4 address and prefix length of interface `name`; `sock` must be an `AF_INET`
/// socket in the interface's namespace. This is the interface's primary address (the ioctl
/// interface sets one address; further ones need netlink).
pub fn set_ipv4(sock: BorrowedFd<'_>, name: &str, addr: Ipv4Addr, prefix: u8) -> io::Result<()> {
    let sin = |a: Ipv4Addr| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a.octets()),
        },
        sin_zero: [0; 8],
    };
    let mask = Ipv4Addr::from(
        u32::MAX
            .checked_shl(32 - u32::from(prefix.min(32)))
            .unwrap_or(0),
    );
    for (req, a) in [(libc::SIOCSIFADDR, addr), (libc::SIOCSIFNETMASK, mask)] {
        let mut r = ifreq(name)?;
        let v = sin(a);
        // SAFETY: sockaddr_in fits the union's sockaddr member (both 16 bytes); this writes
        // its bytes over the addr member, which these requests read as a sockaddr_in.
        unsafe {
            std::ptr::write_unaligned(
                (&raw mut r.ifr_ifru.ifru_addr).cast::<libc::sockaddr_in>(),
                v,
            );
        }
        ioctl(sock, req, &mut r)?;
    }
    Ok(())
}

/// Adds IPv6 address `addr/prefix` to interface `name` in namespace `netns` (or this one); an
/// address it already has is fine.
pub fn add_ipv6(netns: Option<&str>, name: &str, addr: Ipv6Addr, prefix: u8) -> io::Result<()> {
    let sock = run_in_opt(netns, || socket(libc::AF_INET6, libc::SOCK_DGRAM, 0))?;
    let index = ifindex(sock.as_fd(), name)?;
    let mut r = libc::in6_ifreq {
        ifr6_addr: libc::in6_addr {
            s6_addr: addr.octets(),
        },
        ifr6_prefixlen: u32::from(prefix.min(128)),
        ifr6_ifindex: index,
    };
    // SAFETY: SIOCSIFADDR on an AF_INET6 socket reads one `in6_ifreq`, which `r` is.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFADDR, &raw mut r) } < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EEXIST) {
            return Err(e);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn loopback_is_found_and_bad_names_are_errors() {
        let s = control_socket(None).unwrap();
        assert_eq!(ifindex(s.as_fd(), "lo").unwrap(), 1);
        assert!(ifindex(s.as_fd(), "no-such-if-xyz").is_err());
        assert!(ifindex(s.as_fd(), "a-name-far-too-long").is_err());
        assert!(ifindex(s.as_fd(), "").is_err());
        assert!(run_in("no-such-ns-fpt", || Ok(())).is_err());
        assert!(run_in("../etc", || Ok(())).is_err());
    }
}
