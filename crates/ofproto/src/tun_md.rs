//! Tunnel metadata `tun_metadata0`..`tun_metadata63`: the GENEVE options a bridge's TLV map
//! (`add-tlv-map`, `NXT_TLV_TABLE_MOD`) names, as OVS's `lib/tun-metadata.c` keeps them.
//!
//! # The TLV table
//! A bridge's [`TunTable`] maps up to 64 options (class, type, length of 0 to 124 bytes, a
//! multiple of 4) to field numbers. The values share an option space of 256 bytes handed out in
//! 4-byte chunks: a mapping fits while its chunks are free (OVS splits an option over free
//! chunks that are not adjacent, so only their number counts). Adding a field that is mapped
//! already is [`TunTableError::AlreadyMapped`], an option mapped to another field
//! [`TunTableError::DupEntry`], and one that does not fit [`TunTableError::TableFull`].
//!
//! # Where values live in the pipeline key
//! The 256-byte option space is the pipeline key's GENEVE option area (252 bytes, where the
//! datapath keeps the raw options; translation rewrites them into the fields) and, for the
//! last chunk, [`PipeMeta::tun_md_tail`]. Which field is present is
//! [`PipeMeta::tun_md_present`] (in a mask: which presences are matched). The chunks of a field
//! come from one layout for the whole process: a field number mapped on several bridges with
//! the same length shares its chunks; another length there, or chunks that other bridges'
//! mappings hold, fails as [`TunTableError::TableFull`] (the limit of one layout; OVS keeps one
//! per bridge).

use std::sync::RwLock;

use flow::FlowWords;
use flow::key::GENEVE_OPTS_OFS;

use crate::pipekey::PipeMeta;
use crate::tunnel::TlvMapping;

/// Number of tunnel-metadata fields (`TUN_METADATA_NUM_OPTS`).
pub const N_TUN_METADATA: usize = 64;
/// Longest option value, in bytes (`TLV_MAX_OPT_SIZE`).
pub const TUN_METADATA_MAX_LEN: usize = 124;
/// The option space the values of one table share (`TUN_METADATA_TOT_OPT_SIZE`).
pub const TUN_METADATA_OPT_SPACE: usize = 256;
const CHUNK: usize = 4;
const N_CHUNKS: usize = TUN_METADATA_OPT_SPACE / CHUNK;
/// The chunk kept in [`PipeMeta::tun_md_tail`] rather than in the key.
const TAIL_CHUNK: usize = N_CHUNKS - 1;

/// Why a TLV table change is refused (OVS's `NXTTMFC_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TunTableError {
    #[error("the field is already mapped")]
    AlreadyMapped,
    #[error("the option is already mapped")]
    DupEntry,
    #[error("no room for the option")]
    TableFull,
}

/// Where a mapped field's value lives: its length and the 4-byte chunks of the option space
/// holding it, in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TunLoc {
    pub len: u8,
    pub chunks: u64,
}

#[derive(Clone, Copy)]
struct Layout {
    locs: [TunLoc; N_TUN_METADATA],
    users: [u32; N_TUN_METADATA],
    used: u64,
}

static LAYOUT: RwLock<Layout> = RwLock::new(Layout {
    locs: [TunLoc { len: 0, chunks: 0 }; N_TUN_METADATA],
    users: [0; N_TUN_METADATA],
    used: 0,
});

/// Where field `n`'s value lives: where a bridge's mapping put it, or else (for a match
/// that no bridge holds, such as one `ovs-ofctl parse-flow` reads) 16 bytes of the option
/// space by the field's number alone, as [`mapped`] says.
pub fn loc(n: usize) -> TunLoc {
    let l = LAYOUT.read().unwrap_or_else(|e| e.into_inner());
    let n = n % N_TUN_METADATA;
    if l.users[n] > 0 {
        return l.locs[n];
    }
    TunLoc {
        len: DYNAMIC_LEN as u8,
        chunks: 0xf << (4 * (n % 16)),
    }
}

/// The length of a field no bridge maps: values are as long as they need up to this (OVS's
/// "dynamic allocation" of a match without a switch's table).
pub const DYNAMIC_LEN: usize = 16;

/// Whether a bridge maps field `n` (its values then have the mapped length).
pub fn mapped(n: usize) -> bool {
    LAYOUT.read().unwrap_or_else(|e| e.into_inner()).users[n % N_TUN_METADATA] > 0
}

/// Takes chunks for field `n` of `len` bytes, or shares them when the field has them at that
/// length already.
fn claim(n: usize, len: u8) -> Result<(), TunTableError> {
    let mut l = LAYOUT.write().unwrap_or_else(|e| e.into_inner());
    if l.users[n] > 0 {
        if l.locs[n].len != len {
            return Err(TunTableError::TableFull);
        }
        l.users[n] += 1;
        return Ok(());
    }
    let mut chunks = 0u64;
    let mut want = usize::from(len) / CHUNK;
    let mut c = 0;
    while want > 0 && c < N_CHUNKS {
        if (l.used | chunks) & (1 << c) == 0 {
            chunks |= 1 << c;
            want -= 1;
        }
        c += 1;
    }
    if want > 0 {
        return Err(TunTableError::TableFull);
    }
    l.used |= chunks;
    l.locs[n] = TunLoc { len, chunks };
    l.users[n] = 1;
    Ok(())
}

fn release(n: usize) {
    let mut l = LAYOUT.write().unwrap_or_else(|e| e.into_inner());
    if l.users[n] == 0 {
        return;
    }
    l.users[n] -= 1;
    if l.users[n] == 0 {
        l.used &= !l.locs[n].chunks;
        l.locs[n] = TunLoc::default();
    }
}

/// A bridge's TLV table: which option each `tun_metadata<n>` holds.
#[derive(Debug)]
pub struct TunTable {
    entries: [Option<TlvMapping>; N_TUN_METADATA],
}

impl Default for TunTable {
    fn default() -> Self {
        TunTable {
            entries: [None; N_TUN_METADATA],
        }
    }
}

impl TunTable {
    /// The option field `n` holds.
    pub fn get(&self, n: usize) -> Option<TlvMapping> {
        self.entries.get(n).copied().flatten()
    }

    /// The mappings, by field number.
    pub fn iter(&self) -> impl Iterator<Item = (usize, TlvMapping)> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(n, m)| m.map(|m| (n, m)))
    }

    /// Bytes of the option space the mappings take.
    pub fn allocated(&self) -> usize {
        self.iter().map(|(_, m)| usize::from(m.len)).sum()
    }

    /// The field holding option `class`/`kind`.
    pub fn find(&self, class: u16, kind: u8) -> Option<(usize, TlvMapping)> {
        self.iter()
            .find(|(_, m)| m.class == class && m.kind == kind)
    }

    /// Whether `maps` could all be added, checked in order as OVS adds them.
    pub fn check_add(&self, maps: &[(usize, TlvMapping)]) -> Result<(), TunTableError> {
        let mut free = TUN_METADATA_OPT_SPACE - self.allocated();
        for (i, &(n, m)) in maps.iter().enumerate() {
            let earlier = &maps[..i];
            if self.get(n).is_some() || earlier.iter().any(|&(e, _)| e == n) {
                return Err(TunTableError::AlreadyMapped);
            }
            let same = |o: &TlvMapping| o.class == m.class && o.kind == m.kind;
            if self.find(m.class, m.kind).is_some() || earlier.iter().any(|(_, o)| same(o)) {
                return Err(TunTableError::DupEntry);
            }
            free = free
                .checked_sub(usize::from(m.len))
                .ok_or(TunTableError::TableFull)?;
        }
        Ok(())
    }

    /// Adds `maps` (all or none).
    pub fn add(&mut self, maps: &[(usize, TlvMapping)]) -> Result<(), TunTableError> {
        self.check_add(maps)?;
        for (i, &(n, m)) in maps.iter().enumerate() {
            if let Err(e) = claim(n, m.len) {
                for &(done, _) in &maps[..i] {
                    self.delete(done);
                }
                return Err(e);
            }
            self.entries[n] = Some(m);
        }
        Ok(())
    }

    /// Removes field `n`'s mapping, if it has one.
    pub fn delete(&mut self, n: usize) {
        if let Some(e) = self.entries.get_mut(n)
            && e.take().is_some()
        {
            release(n);
        }
    }

    /// Removes every mapping.
    pub fn clear(&mut self) {
        for n in 0..N_TUN_METADATA {
            self.delete(n);
        }
    }
}

impl Drop for TunTable {
    fn drop(&mut self) {
        self.clear();
    }
}

/// The key offset of chunk `c` (below [`TAIL_CHUNK`]).
fn chunk_ofs(c: usize) -> usize {
    GENEVE_OPTS_OFS + CHUNK * c
}

fn chunk_list(loc: TunLoc) -> impl Iterator<Item = usize> {
    (0..N_CHUNKS).filter(move |c| loc.chunks & (1 << c) != 0)
}

/// Copies field value at `loc` into `out` (`loc.len` bytes).
pub fn read(dp: &FlowWords, meta: &PipeMeta, loc: TunLoc, out: &mut [u8]) {
    for (i, c) in chunk_list(loc).enumerate() {
        let dst = &mut out[CHUNK * i..CHUNK * (i + 1)];
        if c == TAIL_CHUNK {
            dst.copy_from_slice(&meta.tun_md_tail.to_be_bytes());
        } else {
            dp.bytes_at(chunk_ofs(c), dst);
        }
    }
}

/// Stores `value` (`loc.len` bytes) as the field value at `loc`.
pub fn write(dp: &mut FlowWords, meta: &mut PipeMeta, loc: TunLoc, value: &[u8]) {
    for (i, c) in chunk_list(loc).enumerate() {
        let src = &value[CHUNK * i..CHUNK * (i + 1)];
        if c == TAIL_CHUNK {
            meta.tun_md_tail = u32::from_be_bytes([src[0], src[1], src[2], src[3]]);
        } else {
            dp.set_bytes_at(chunk_ofs(c), src);
        }
    }
}

/// Field `n`'s value in `dp`/`meta` and its length, in a buffer of the longest length.
pub fn value(dp: &FlowWords, meta: &PipeMeta, n: usize) -> ([u8; TUN_METADATA_MAX_LEN], usize) {
    let mut out = [0u8; TUN_METADATA_MAX_LEN];
    let l = loc(n);
    read(dp, meta, l, &mut out[..usize::from(l.len)]);
    (out, usize::from(l.len))
}

/// Whether field `n` is present (in a key) or its presence matched (in a mask).
pub fn present(meta: &PipeMeta, n: usize) -> bool {
    meta.tun_md_present & (1 << (n % N_TUN_METADATA)) != 0
}

/// Marks field `n` present (or its presence matched).
pub fn set_present(meta: &mut PipeMeta, n: usize) {
    meta.tun_md_present |= 1 << (n % N_TUN_METADATA);
}

/// Clears every field value and presence (before the options of a packet are read in).
pub fn clear_all(dp: &mut FlowWords, meta: &mut PipeMeta) {
    dp.set_bytes_at(GENEVE_OPTS_OFS, &[0u8; flow::key::GENEVE_OPTS_MAX]);
    meta.tun_md_present = 0;
    meta.tun_md_tail = 0;
}

/// The GENEVE options (as on the wire) of the fields `table` maps that are present in
/// `dp`/`meta`, in field order.
pub fn to_geneve(table: &TunTable, dp: &FlowWords, meta: &PipeMeta) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, m) in table.iter() {
        if !present(meta, n) {
            continue;
        }
        let (v, _) = value(dp, meta, n);
        let len = usize::from(m.len);
        out.extend_from_slice(&m.class.to_be_bytes());
        out.push(m.kind);
        out.push((len / CHUNK) as u8);
        out.extend_from_slice(&v[..len]);
    }
    out
}

/// Whether any field value or presence is set (in a mask: consulted).
pub fn any(dp: &FlowWords, meta: &PipeMeta) -> bool {
    let mut area = [0u8; flow::key::GENEVE_OPTS_MAX];
    dp.bytes_at(GENEVE_OPTS_OFS, &mut area);
    meta.tun_md_present != 0 || meta.tun_md_tail != 0 || area.iter().any(|&b| b != 0)
}

/// Whether every mapped field has chunks of its own, as many as its length needs.
#[cfg(test)]
fn disjoint() -> bool {
    let l = *LAYOUT.read().unwrap();
    let mut seen = 0u64;
    for (loc, users) in l.locs.iter().zip(l.users) {
        if users > 0 {
            if seen & loc.chunks != 0
                || loc.chunks.count_ones() as usize * CHUNK != usize::from(loc.len)
            {
                return false;
            }
            seen |= loc.chunks;
        }
    }
    seen == l.used
}

/// The layout is shared by the process: the tests that map fields take turns and leave it
/// as they found it.
#[cfg(test)]
pub(crate) fn test_serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(class: u16, kind: u8, len: u8) -> TlvMapping {
        TlvMapping { class, kind, len }
    }

    use super::test_serial as serial;

    #[test]
    fn space_is_counted_in_chunks_as_ovs_counts_it() {
        let _g = serial();
        let mut t = TunTable::default();
        t.add(&[(48, m(0xffff, 1, 124)), (49, m(0xffff, 2, 124))])
            .unwrap();
        assert_eq!(t.allocated(), 248);
        assert_eq!(
            t.add(&[(50, m(0xffff, 3, 12))]),
            Err(TunTableError::TableFull)
        );
        t.add(&[(50, m(0xffff, 3, 8))]).unwrap();
        assert_eq!(t.allocated(), 256);
        assert_eq!(
            t.add(&[(51, m(0xffff, 4, 4))]),
            Err(TunTableError::TableFull)
        );
        assert_eq!(t.add(&[(51, m(0xffff, 4, 0))]), Ok(()));
        assert!(disjoint());
        // A freed gap takes a longer option in pieces.
        t.delete(50);
        t.delete(48);
        t.add(&[(52, m(0xffff, 5, 124)), (53, m(0xffff, 6, 8))])
            .unwrap();
        assert!(disjoint());
        assert_eq!(loc(53).len, 8);
        drop(t);
        assert!((48..56).all(|n| !mapped(n)));
    }

    #[test]
    fn a_field_or_option_is_mapped_once_and_a_failed_add_adds_nothing() {
        let _g = serial();
        let mut t = TunTable::default();
        t.add(&[(56, m(1, 1, 4))]).unwrap();
        assert_eq!(
            t.add(&[(56, m(1, 2, 4))]),
            Err(TunTableError::AlreadyMapped)
        );
        assert_eq!(t.add(&[(57, m(1, 1, 4))]), Err(TunTableError::DupEntry));
        assert_eq!(
            t.add(&[(57, m(1, 3, 4)), (58, m(1, 3, 4))]),
            Err(TunTableError::DupEntry)
        );
        assert_eq!(
            t.add(&[(57, m(1, 3, 4)), (57, m(1, 4, 4))]),
            Err(TunTableError::AlreadyMapped)
        );
        assert_eq!(t.get(57), None);
        t.delete(57);
        t.delete(56);
        t.add(&[(56, m(1, 2, 8))]).unwrap();
        assert_eq!(t.find(1, 2), Some((56, m(1, 2, 8))));
    }

    #[test]
    fn bridges_share_a_field_of_the_same_length() {
        let _g = serial();
        let (mut a, mut b) = (TunTable::default(), TunTable::default());
        a.add(&[(60, m(2, 1, 16))]).unwrap();
        b.add(&[(60, m(2, 1, 16))]).unwrap();
        assert_eq!(b.add(&[(61, m(2, 2, 4))]), Ok(()));
        let mut c = TunTable::default();
        assert_eq!(c.add(&[(61, m(2, 2, 8))]), Err(TunTableError::TableFull));
        drop(a);
        assert_eq!(loc(60).len, 16);
        drop(b);
        assert!(!mapped(60));
    }

    #[test]
    fn values_round_trip_through_key_and_tail() {
        let mut dp = FlowWords::default();
        let mut meta = PipeMeta::default();
        let l = TunLoc {
            len: 12,
            chunks: 1 << 2 | 1 << 62 | 1 << 63,
        };
        let v: Vec<u8> = (1..=12).collect();
        write(&mut dp, &mut meta, l, &v);
        assert_eq!(meta.tun_md_tail, 0x090a_0b0c);
        let mut out = [0u8; 12];
        read(&dp, &meta, l, &mut out);
        assert_eq!(&out[..], &v[..]);
    }
}
