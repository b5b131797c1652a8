//! A tap's receive of UDP-tunnel GSO frames (`netdev::vnet_tnl`): the tunnel virtio-net header
//! and the frame from arbitrary bytes. The invariants are in `src/vnet_tnl.rs`.
#![no_main]

#[path = "../src/vnet_tnl.rs"]
mod vnet_tnl;

libfuzzer_sys::fuzz_target!(|data: &[u8]| vnet_tnl::check_vnet_tnl(data));
