//! Port backends implementing the datapath's [`datapath::port::Port`]: in-memory `replay` and
//! `sink` ports, `pcap` file ports, and ports on Linux interfaces (`afpacket`, `afxdp` with its
//! eBPF program in `bpf`, `tap`, and `vhostuser` for VMs and DPDK applications over virtio, and `virtio_user`, the VM's side of
//! such a socket, for the traffic generator; `dpdk` for DPDK devices, under the cargo
//! feature `dpdk`; `netns` opens them inside network namespaces); plus the
//! classic pcap file format they and the command-line tools read and write.
// Unsafe code is confined to the kernel I/O modules, which allow it one by one.
#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod addr_watch;
#[allow(unsafe_code)]
pub mod afpacket;
#[allow(unsafe_code)]
pub mod afxdp;
pub mod anchor_traffic;
#[allow(unsafe_code)]
pub mod bpf;
mod csum;
#[cfg(feature = "dpdk")]
#[allow(unsafe_code)]
pub mod dpdk;
pub mod dummy;
#[allow(unsafe_code)]
pub mod ifaddrs;
mod log;
pub mod memory;
#[allow(unsafe_code)]
pub mod netns;
pub mod pcap;
pub mod pcap_port;
#[allow(unsafe_code)]
pub mod tap;
#[allow(unsafe_code)]
pub mod vhost;
#[allow(unsafe_code)]
pub mod virtio_user;
pub mod vnet;
pub mod vnet_tnl;
