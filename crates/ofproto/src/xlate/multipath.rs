//! `multipath` in translation (OVS's `multipath_execute()`): the hash of the chosen fields
//! ([`super::flow_hash`]) picks a link by the action's algorithm; the link number is written
//! to the destination, and the megaflow matches the hashed fields.

use super::Ctx;
use super::flow_hash::{flow_hash_fields, hash_2words, mask_hash_fields};
use crate::syntax::Multipath;

/// OVS's `hrw` (highest random weight) over `n` links.
fn hrw(hash: u32, n: u32) -> u32 {
    let mut best = (0, hash_2words(hash, 0));
    for link in 1..n {
        let w = hash_2words(hash, link);
        if w > best.1 {
            best = (link, w);
        }
    }
    best.0
}

/// OVS's `iter_hash`: rehash until a value below `n` comes out, modulo the next power of two
/// (or `modulo`, when it is between `n` and `2n`).
fn iter_hash(hash: u32, n: u32, modulo: u32) -> u32 {
    let modulo = if modulo < n || modulo / 2 > n {
        n.next_power_of_two()
    } else {
        modulo
    };
    let mut i = 0;
    loop {
        let link = hash_2words(hash, i) % modulo;
        i += 1;
        if link < n {
            return link;
        }
    }
}

/// The link `algorithm` (an index into [`crate::syntax::MP_ALGORITHMS`]) picks among `n`.
pub(super) fn choose_link(hash: u32, algorithm: u16, n: u32, arg: u32) -> u32 {
    match algorithm {
        0 => hash % n,
        1 if n == 1 => 0,
        1 => hash / (u32::MAX / n + 1),
        2 if n <= 64 => hrw(hash, n),
        2 => iter_hash(hash, n, 0),
        _ => iter_hash(hash, n, arg),
    }
}

impl Ctx<'_> {
    pub(super) fn multipath(&mut self, m: &Multipath) {
        let hash = flow_hash_fields(&self.flow, m.fields, m.basis);
        let link = choose_link(hash, m.algorithm, u32::from(m.max_link) + 1, m.arg);
        mask_hash_fields(&self.flow, &mut self.wc, m.fields);
        m.dst.unwildcard(&mut self.wc);
        m.dst.write(&mut self.flow, link.into());
    }
}
