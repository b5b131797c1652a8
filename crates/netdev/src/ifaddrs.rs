//! The kernel's interface addresses in the calling thread's network namespace, through
//! `getifaddrs(3)`: each interface's Ethernet address and its IPv4 and IPv6 addresses with
//! their prefix lengths.
//!
//! The switch reads them for its bridges' own ports (a bridge's LOCAL port is a kernel device
//! named as the bridge): the addresses an operator gives that device (`ip addr add 172.31.0.1/24
//! dev br-phys`) are the bridge's local tunnel endpoints and connected routes, as
//! `ovs-vswitchd` reads them (`netdev_get_addrs()`), and its Ethernet address is the bridge's.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One interface's addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IfAddrs {
    /// The Ethernet address, for an Ethernet device.
    pub mac: Option<[u8; 6]>,
    /// IPv4 and IPv6 addresses with prefix lengths, in the kernel's order.
    pub ips: Vec<(IpAddr, u8)>,
}

/// Every interface's addresses, by interface name.
pub fn interface_addresses() -> io::Result<BTreeMap<String, IfAddrs>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `head` is a valid place for getifaddrs(3) to store its list's head.
    if unsafe { libc::getifaddrs(&raw mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out: BTreeMap<String, IfAddrs> = BTreeMap::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_name.is_null() || ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: `ifa_name` is a NUL-terminated string owned by the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }.to_string_lossy();
        let entry = out.entry(name.into_owned()).or_default();
        // SAFETY: `ifa_addr` is non-null (checked) and points at a sockaddr of the family
        // it names, as does a non-null `ifa_netmask`; each is read as its family's struct.
        unsafe {
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let a = &*ifa.ifa_addr.cast::<libc::sockaddr_in>();
                    let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
                    let plen = if ifa.ifa_netmask.is_null() {
                        32
                    } else {
                        let m = &*ifa.ifa_netmask.cast::<libc::sockaddr_in>();
                        u32::from_be(m.sin_addr.s_addr).count_ones() as u8
                    };
                    entry.ips.push((IpAddr::V4(ip), plen));
                }
                libc::AF_INET6 => {
                    let a = &*ifa.ifa_addr.cast::<libc::sockaddr_in6>();
                    let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
                    let plen = if ifa.ifa_netmask.is_null() {
                        128
                    } else {
                        let m = &*ifa.ifa_netmask.cast::<libc::sockaddr_in6>();
                        m.sin6_addr
                            .s6_addr
                            .iter()
                            .map(|b| b.count_ones())
                            .sum::<u32>() as u8
                    };
                    entry.ips.push((IpAddr::V6(ip), plen));
                }
                libc::AF_PACKET => {
                    let ll = &*ifa.ifa_addr.cast::<libc::sockaddr_ll>();
                    if ll.sll_halen == 6 {
                        let mut mac = [0u8; 6];
                        mac.copy_from_slice(&ll.sll_addr[..6]);
                        entry.mac = Some(mac);
                    }
                }
                _ => {}
            }
        }
    }
    // SAFETY: `head` is the list getifaddrs returned; nothing refers to it any more.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_its_addresses() {
        let all = interface_addresses().unwrap();
        let lo = all.get("lo").expect("every namespace has lo");
        assert!(
            lo.ips.contains(&(IpAddr::V4(Ipv4Addr::LOCALHOST), 8)),
            "{lo:?}"
        );
    }
}
