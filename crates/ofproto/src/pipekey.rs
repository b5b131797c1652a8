//! The pipeline key: what an OpenFlow table matches on.
//!
//! OpenFlow tables match everything the datapath key ([`flow::FlowKey`]) holds plus pipeline
//! metadata that never leaves the switch: the sixteen 32-bit registers `reg0`..`reg15` and the
//! 64-bit `metadata` field (OVS's `struct flow` keeps them beside the packet fields the same way).
//! The wider registers are views: `xreg<N>` is `reg<2N>` (high 32 bits) and `reg<2N+1>` (low),
//! `xxreg<N>` is `reg<4N>`..`reg<4N+3>` from high to low, as in ovs-fields(7).
//!
//! During translation `dp.in_port` holds the **OpenFlow** port number of the input port (what
//! `in_port=` matches), not the datapath port number the key had in the datapath.
//!
//! [`PipeMask`] has the same shape (a set bit means "must be equal"), and [`PipeMatch`] stores
//! its key pre-masked, like [`flow::Match`]. Translation accumulates the bits it consulted into a
//! [`PipeMask`] with [`PipeMask::union_with`]; the datapath part of that mask becomes the
//! megaflow's mask.

use flow::{FlowKey, FlowWords, Mask};

/// Pipeline metadata beside the datapath key: registers and the `metadata` field.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Hash)]
pub struct PipeMeta {
    /// `reg0`..`reg15`.
    pub regs: [u32; 16],
    /// The OpenFlow `metadata` field (`write_metadata`, `metadata=`).
    pub metadata: u64,
    /// `conj_id`: zero in a packet's key; the classifier sets it for the lookup that finds
    /// the flow of a complete conjunctive match (ovs-fields(7) "Conjunctive Match Fields").
    pub conj_id: u32,
    /// `skb_priority`: the QoS queue priority the datapath gives the packet (`set_queue`,
    /// `enqueue`, `pop_queue` change it). OVS keeps it in `struct flow`; OpenFlow cannot
    /// match it (it has no NXM or OXM code), but `ofproto/trace` and megaflows show it.
    pub skb_priority: u32,
    /// Which `tun_metadata<n>` fields are present (bit `n`); in a mask, whose presence is
    /// matched (see [`crate::tun_md`]).
    pub tun_md_present: u64,
    /// The last 4 bytes of the 256-byte tunnel-metadata option space, which the key's GENEVE
    /// area (252 bytes) lacks.
    pub tun_md_tail: u32,
}

impl PipeMeta {
    /// Number of 32-bit registers.
    pub const N_REGS: usize = 16;
    /// Number of 64-bit `xreg` views.
    pub const N_XREGS: usize = 8;
    /// Number of 128-bit `xxreg` views.
    pub const N_XXREGS: usize = 4;

    /// `xreg<n>`: `reg<2n>` in the high half, `reg<2n+1>` in the low half. `n` is taken modulo 8.
    pub fn xreg(&self, n: usize) -> u64 {
        let n = n % Self::N_XREGS;
        (u64::from(self.regs[2 * n]) << 32) | u64::from(self.regs[2 * n + 1])
    }

    /// Sets `xreg<n>` (`n` modulo 8).
    pub fn set_xreg(&mut self, n: usize, v: u64) {
        let n = n % Self::N_XREGS;
        self.regs[2 * n] = (v >> 32) as u32;
        self.regs[2 * n + 1] = v as u32;
    }

    /// `xxreg<n>`: `reg<4n>` (most significant) .. `reg<4n+3>`. `n` is taken modulo 4.
    pub fn xxreg(&self, n: usize) -> u128 {
        let n = n % Self::N_XXREGS;
        self.regs[4 * n..4 * n + 4]
            .iter()
            .fold(0u128, |acc, &r| (acc << 32) | u128::from(r))
    }

    /// Sets `xxreg<n>` (`n` modulo 4).
    pub fn set_xxreg(&mut self, n: usize, v: u128) {
        let n = n % Self::N_XXREGS;
        for (i, r) in self.regs[4 * n..4 * n + 4].iter_mut().enumerate() {
            *r = (v >> (96 - 32 * i)) as u32;
        }
    }

    /// Whether every register and the metadata are zero.
    pub fn is_zero(&self) -> bool {
        self.metadata == 0
            && self.conj_id == 0
            && self.skb_priority == 0
            && self.tun_md_present == 0
            && self.tun_md_tail == 0
            && self.regs.iter().all(|&r| r == 0)
    }

    /// Bitwise AND.
    pub fn and(&self, other: &PipeMeta) -> PipeMeta {
        let mut out = *self;
        for (a, b) in out.regs.iter_mut().zip(other.regs.iter()) {
            *a &= *b;
        }
        out.metadata &= other.metadata;
        out.conj_id &= other.conj_id;
        out.skb_priority &= other.skb_priority;
        out.tun_md_present &= other.tun_md_present;
        out.tun_md_tail &= other.tun_md_tail;
        out
    }

    /// Bitwise OR.
    pub fn or(&self, other: &PipeMeta) -> PipeMeta {
        let mut out = *self;
        for (a, b) in out.regs.iter_mut().zip(other.regs.iter()) {
            *a |= *b;
        }
        out.metadata |= other.metadata;
        out.conj_id |= other.conj_id;
        out.skb_priority |= other.skb_priority;
        out.tun_md_present |= other.tun_md_present;
        out.tun_md_tail |= other.tun_md_tail;
        out
    }
}

/// The key an OpenFlow table looks up: the datapath key plus pipeline metadata.
#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub struct PipeKey {
    /// Packet fields and datapath metadata; `in_port` is the OpenFlow port number.
    pub dp: FlowKey,
    /// Registers and `metadata`.
    pub meta: PipeMeta,
}

impl PipeKey {
    /// All fields zero.
    pub fn new() -> Self {
        Self::default()
    }
}

/// Which bits of a [`PipeKey`] matter: a set bit means "must be equal".
#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub struct PipeMask {
    pub dp: Mask,
    pub meta: PipeMeta,
}

impl PipeMask {
    /// The catch-all mask (no bit matters).
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether no bit matters: a match with this mask matches every key.
    pub fn is_catchall(&self) -> bool {
        self.dp.is_zero() && self.meta.is_zero()
    }

    /// ORs `other` into `self`: afterwards every bit either mask selected is selected.
    /// Translation accumulates the bits it consulted this way.
    pub fn union_with(&mut self, other: &PipeMask) {
        or_words(&mut self.dp, &other.dp);
        self.meta = self.meta.or(&other.meta);
    }
}

fn or_words(dst: &mut FlowWords, src: &FlowWords) {
    let mut m = src.map();
    while m != 0 {
        let i = m.trailing_zeros() as usize;
        m &= m - 1;
        let v = src.word(i);
        if v != 0 {
            dst.set_word(i, dst.word(i) | v);
        }
    }
}

/// A key and the mask that says which of its bits matter; the key is stored masked.
#[derive(Default, PartialEq, Eq, Debug)]
pub struct PipeMatch {
    key: PipeKey,
    mask: PipeMask,
}

impl Clone for PipeMatch {
    fn clone(&self) -> Self {
        PipeMatch {
            key: self.key.clone(),
            mask: self.mask.clone(),
        }
    }

    /// Copies only the words `src` holds: a match uses a few of its key's 64 words, and a
    /// table dump copies each rule's match into one reused spec.
    fn clone_from(&mut self, src: &Self) {
        copy_words(&mut self.key.dp, &src.key.dp);
        copy_words(&mut self.mask.dp, &src.mask.dp);
        self.key.meta = src.key.meta;
        self.mask.meta = src.mask.meta;
    }
}

/// Makes `dst` equal to `src`, writing only the words `src` holds.
fn copy_words(dst: &mut FlowWords, src: &FlowWords) {
    dst.clear();
    let mut m = src.map();
    while m != 0 {
        let i = m.trailing_zeros() as usize;
        m &= m - 1;
        dst.set_word(i, src.word(i));
    }
}

impl PipeMatch {
    /// Builds a match; bits of `key` outside `mask` are cleared (and zero mask words dropped),
    /// as [`flow::Match::new`] does.
    pub fn new(key: &PipeKey, mask: &PipeMask) -> Self {
        let dp = flow::Match::new(&key.dp, &mask.dp);
        PipeMatch {
            key: PipeKey {
                dp: dp.key().clone(),
                meta: key.meta.and(&mask.meta),
            },
            mask: PipeMask {
                dp: dp.mask().clone(),
                meta: mask.meta,
            },
        }
    }

    /// The match that matches every key.
    pub fn catchall() -> Self {
        Self::default()
    }

    /// The masked key.
    pub fn key(&self) -> &PipeKey {
        &self.key
    }

    /// The mask.
    pub fn mask(&self) -> &PipeMask {
        &self.mask
    }

    /// The key and mask, to be written together: the caller keeps the key masked (no bit set
    /// outside the mask), as [`Self::new`] makes it.
    pub(crate) fn parts_mut(&mut self) -> (&mut PipeKey, &mut PipeMask) {
        (&mut self.key, &mut self.mask)
    }

    /// Whether `key` agrees with this match on every masked bit.
    pub fn matches(&self, key: &PipeKey) -> bool {
        let mut m = self.mask.dp.map();
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if key.dp.word(i) & self.mask.dp.word(i) != self.key.dp.word(i) {
                return false;
            }
        }
        key.meta.and(&self.mask.meta) == self.key.meta
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn wide_registers_are_views_of_reg() {
        let mut m = PipeMeta::default();
        m.set_xreg(1, 0x1122_3344_5566_7788);
        assert_eq!(m.regs[2], 0x1122_3344);
        assert_eq!(m.regs[3], 0x5566_7788);
        assert_eq!(m.xreg(1), 0x1122_3344_5566_7788);
        m.set_xxreg(1, 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
        assert_eq!(
            m.regs[4..8],
            [0x0102_0304, 0x0506_0708, 0x090a_0b0c, 0x0d0e_0f10]
        );
        assert_eq!(m.xxreg(1), 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
        assert_eq!(m.xreg(2), 0x0102_0304_0506_0708);
    }

    #[test]
    fn match_is_premasked_and_matches() {
        let mut k = PipeKey::new();
        k.dp.set_eth_type(0x0800)
            .set_nw_dst(Ipv4Addr::new(10, 1, 2, 3));
        k.meta.regs[0] = 0xabcd;
        let mut m = PipeMask::new();
        assert!(m.is_catchall());
        m.dp.set_eth_type(0xffff)
            .set_nw_dst(Ipv4Addr::new(255, 255, 0, 0));
        m.meta.regs[0] = 0xff;
        assert!(!m.is_catchall());
        let pm = PipeMatch::new(&k, &m);
        assert_eq!(pm.key().dp.nw_dst(), Ipv4Addr::new(10, 1, 0, 0));
        assert_eq!(pm.key().meta.regs[0], 0xcd);
        let mut probe = k.clone();
        probe
            .dp
            .set_nw_dst(Ipv4Addr::new(10, 1, 9, 9))
            .set_tp_dst(80);
        probe.meta.regs[0] = 0x11cd;
        assert!(pm.matches(&probe));
        probe.meta.regs[0] = 0x11ce;
        assert!(!pm.matches(&probe));
        assert!(PipeMatch::catchall().matches(&probe));
    }

    #[test]
    fn union_accumulates_bits() {
        let mut a = PipeMask::new();
        a.dp.set_tp_dst(0x00ff);
        a.meta.regs[3] = 1;
        let mut b = PipeMask::new();
        b.dp.set_tp_dst(0xff00).set_nw_proto(0xff);
        b.meta.metadata = 7;
        a.union_with(&b);
        assert_eq!(a.dp.tp_dst(), 0xffff);
        assert_eq!(a.dp.nw_proto(), 0xff);
        assert_eq!(a.meta.regs[3], 1);
        assert_eq!(a.meta.metadata, 7);
    }
}
