//! Tunnel metadata in the field accessors: the `u128` view of a value's last 16 bytes, and
//! matches and writes of whole values (see the module documentation of [`super`]).

use flow::FlowWords;

use super::{Field, Loc, MatchError, TUN_METADATA_MAX_LEN};
use crate::pipekey::{PipeKey, PipeMask, PipeMeta};

/// The last 16 bytes of `tun_metadata<n>` (all of a shorter value).
pub(super) fn read_tun_md(dp: &FlowWords, meta: &PipeMeta, n: usize) -> u128 {
    let (v, len) = crate::tun_md::value(dp, meta, n);
    let mut b = [0u8; 16];
    let k = len.min(16);
    b[16 - k..].copy_from_slice(&v[len - k..len]);
    u128::from_be_bytes(b)
}

/// Writes the last 16 bytes of `tun_metadata<n>` (all of a shorter value), keeping the bytes
/// before them.
pub(super) fn write_tun_md(dp: &mut FlowWords, meta: &mut PipeMeta, n: usize, v: u128) {
    let loc = crate::tun_md::loc(n);
    let (mut cur, len) = crate::tun_md::value(dp, meta, n);
    let k = len.min(16);
    cur[len - k..len].copy_from_slice(&v.to_be_bytes()[16 - k..]);
    crate::tun_md::write(dp, meta, loc, &cur[..len]);
}

impl Field {
    /// OVS's `tun_metadata_set_match()`: an exact value masks the whole mapped length (a
    /// field no bridge maps, the value's significant bytes). Values with 1-bits outside the mask are refused (OVS
    /// masks them, but then prints a different flow than it was given).
    pub(super) fn match_tun_md(
        &self,
        key: &mut PipeKey,
        mask: &mut PipeMask,
        v: u128,
        m: Option<u128>,
    ) -> Result<(), MatchError> {
        let (vb, mb) = (v.to_be_bytes(), m.map(u128::to_be_bytes));
        let (vs, ms) = (trim_be(&vb), mb.as_ref().map(|m| trim_be(m)));
        match ms {
            Some(ms) if m != Some(u128::MAX) => self.match_tun_md_bytes(key, mask, vs, Some(ms)),
            _ => self.match_tun_md_bytes(key, mask, vs, None),
        }
    }

    /// Matches tunnel metadata `value`/`mask` given as big-endian bytes of any width up to the
    /// mapped length (`mask` `None` is exact; a zero mask matches presence only).
    pub fn match_tun_md_bytes(
        &self,
        key: &mut PipeKey,
        mask: &mut PipeMask,
        value: &[u8],
        m: Option<&[u8]>,
    ) -> Result<(), MatchError> {
        let Loc::TunMetadata(n) = self.loc else {
            return Ok(());
        };
        let loc = crate::tun_md::loc(n);
        if crate::tun_md::present(&mask.meta, n) {
            return Err(MatchError::SetTwice);
        }
        let len = usize::from(loc.len);
        let v = right_align(value, len)?;
        let mv = match m {
            Some(m) => right_align(m, len)?,
            // Unmapped: the value's significant bytes (OVS's dynamic allocation), at least
            // one, so that an exact zero is not a match on presence only.
            None if !crate::tun_md::mapped(n) => {
                let sig = trim_be(value).len().max(1);
                let mut mv = [0u8; TUN_METADATA_MAX_LEN];
                mv[len - sig..len].fill(0xff);
                mv
            }
            None => [0xff; TUN_METADATA_MAX_LEN],
        };
        if v.iter().zip(&mv).any(|(v, m)| v & !m != 0) {
            return Err(MatchError::OutsideMask);
        }
        crate::tun_md::write(&mut key.dp.0, &mut key.meta, loc, &v[..len]);
        crate::tun_md::set_present(&mut key.meta, n);
        crate::tun_md::write(&mut mask.dp.0, &mut mask.meta, loc, &mv[..len]);
        crate::tun_md::set_present(&mut mask.meta, n);
        Ok(())
    }
}

/// `b` without its leading zero bytes.
fn trim_be(b: &[u8]) -> &[u8] {
    let z = b.iter().take_while(|&&x| x == 0).count();
    &b[z..]
}

/// `b` (without leading zero bytes, at most `len` long) right-aligned in `len` bytes.
fn right_align(b: &[u8], len: usize) -> Result<[u8; TUN_METADATA_MAX_LEN], MatchError> {
    let b = trim_be(b);
    if b.len() > len {
        return Err(MatchError::TooLong);
    }
    let mut out = [0u8; TUN_METADATA_MAX_LEN];
    out[len - b.len()..len].copy_from_slice(b);
    Ok(out)
}

/// Makes `tun_metadata<n>` present with `value` (right-aligned, zeros before it; `value`
/// longer than the field keeps its last bytes).
pub fn set_tun_md_wide(dp: &mut FlowWords, meta: &mut PipeMeta, n: usize, value: &[u8]) {
    crate::tun_md::set_present(meta, n);
    let loc = crate::tun_md::loc(n);
    let len = usize::from(loc.len);
    let mut v = [0u8; TUN_METADATA_MAX_LEN];
    let k = value.len().min(len);
    v[len - k..len].copy_from_slice(&value[value.len() - k..]);
    crate::tun_md::write(dp, meta, loc, &v[..len]);
}
