//! The AF_XDP kernel ABI of `linux/if_xdp.h`: the socket's options, the page offsets of its
//! ring mappings, and the structures passed through them, checked against the header's layout
//! at compile time.

pub(super) const AF_XDP: libc::c_int = 44;
pub(super) const SOL_XDP: libc::c_int = 283;
pub(super) const XDP_MMAP_OFFSETS: libc::c_int = 1;
pub(super) const XDP_RX_RING: libc::c_int = 2;
pub(super) const XDP_TX_RING: libc::c_int = 3;
pub(super) const XDP_UMEM_REG: libc::c_int = 4;
pub(super) const XDP_UMEM_FILL_RING: libc::c_int = 5;
pub(super) const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
pub(super) const XDP_STATISTICS: libc::c_int = 7;
pub(super) const XDP_OPTIONS: libc::c_int = 8;
pub(super) const XDP_COPY: u16 = 1 << 1;
pub(super) const XDP_ZEROCOPY: u16 = 1 << 2;
pub(super) const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
pub(super) const XDP_RING_NEED_WAKEUP: u32 = 1;
pub(super) const XDP_OPTIONS_ZEROCOPY: u32 = 1;
pub(super) const XDP_PGOFF_RX_RING: libc::off_t = 0;
pub(super) const XDP_PGOFF_TX_RING: libc::off_t = 0x8000_0000;
pub(super) const XDP_UMEM_PGOFF_FILL_RING: libc::off_t = 0x1_0000_0000;
pub(super) const XDP_UMEM_PGOFF_COMPLETION_RING: libc::off_t = 0x1_8000_0000;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct XdpDesc {
    pub(super) addr: u64,
    pub(super) len: u32,
    pub(super) options: u32,
}

#[repr(C)]
pub(super) struct SockaddrXdp {
    pub(super) family: u16,
    pub(super) flags: u16,
    pub(super) ifindex: u32,
    pub(super) queue_id: u32,
    pub(super) shared_umem_fd: u32,
}

#[repr(C)]
pub(super) struct UmemReg {
    pub(super) addr: u64,
    pub(super) len: u64,
    pub(super) chunk_size: u32,
    pub(super) headroom: u32,
    pub(super) flags: u32,
    pub(super) tx_metadata_len: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct RingOffset {
    pub(super) producer: u64,
    pub(super) consumer: u64,
    pub(super) desc: u64,
    pub(super) flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct MmapOffsets {
    pub(super) rx: RingOffset,
    pub(super) tx: RingOffset,
    pub(super) fr: RingOffset,
    pub(super) cr: RingOffset,
}

/// `struct xdp_statistics`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct XdpStatistics {
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    pub rx_ring_full: u64,
    pub rx_fill_ring_empty_descs: u64,
    pub tx_ring_empty_descs: u64,
}

// The structs against linux/if_xdp.h.
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<XdpDesc>() == 16);
    assert!(offset_of!(XdpDesc, len) == 8);
    assert!(size_of::<SockaddrXdp>() == 16);
    assert!(offset_of!(SockaddrXdp, ifindex) == 4);
    assert!(offset_of!(SockaddrXdp, queue_id) == 8);
    assert!(offset_of!(SockaddrXdp, shared_umem_fd) == 12);
    assert!(size_of::<UmemReg>() == 32);
    assert!(offset_of!(UmemReg, chunk_size) == 16);
    assert!(offset_of!(UmemReg, headroom) == 20);
    assert!(offset_of!(UmemReg, flags) == 24);
    assert!(offset_of!(UmemReg, tx_metadata_len) == 28);
    assert!(size_of::<MmapOffsets>() == 128);
    assert!(offset_of!(MmapOffsets, fr) == 64);
    assert!(offset_of!(RingOffset, flags) == 24);
    assert!(size_of::<XdpStatistics>() == 48);
    assert!(offset_of!(XdpStatistics, tx_ring_empty_descs) == 40);
};
