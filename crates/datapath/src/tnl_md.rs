//! The tunnel metadata area at the front of every packet buffer ([`crate::packet`]): its
//! size ([`TNL_MD_LEN`]), which underlay's metadata it holds ([`TnlMd`]), and its layout.
//! `tnl_pop` ([`crate::tunnel`]) writes the outer headers' metadata there in the flow key's
//! own layout, so that building the key of each later pass is a copy of whole words
//! ([`md_to_key`]):
//!
//! | area bytes | key words | fields |
//! |---|---|---|
//! | 0-23 | 6-8 | `tun_id`; `tun_ipv4_src`, `tun_ipv4_dst`; `tun_tos`, `tun_ttl`, `tun_flags`, `tun_geneve_len`, `tun_tp_src`, `tun_tp_dst` |
//! | 32-63 | 24-27 | `tun_ipv6_src`, `tun_ipv6_dst` (IPv6 underlay only) |
//! | 64-319 | 32-63 | key bytes 256-511: 4 bytes of connection tuple (zero), then `tun_geneve_len` bytes of GENEVE options |
//!
//! Only the words a packet has are copied: 3 for VXLAN or GRE over IPv4, 4 more over IPv6,
//! and the option words of a GENEVE packet.

use flow::FlowKey;
use flow::key::{GENEVE_OPTS_MAX, GENEVE_OPTS_OFS};

/// Bytes of the tunnel metadata area at the front of every buffer.
pub const TNL_MD_LEN: usize = 320;

/// Which tunnel metadata a packet's buffer holds in its metadata area ([`TNL_MD_LEN`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum TnlMd {
    /// None: the packet did not come out of a tunnel (the area's bytes are stale).
    #[default]
    None,
    /// Decapsulated from an IPv4 underlay: tun_id, IPv4 endpoints, flags and ports, and any
    /// GENEVE options.
    Ipv4,
    /// Decapsulated from an IPv6 underlay: as `Ipv4`, with the IPv6 endpoints instead.
    Ipv6,
}

// Where the key's tunnel words sit in the metadata area (module documentation).
/// First key word of the tunnel block (tun_id) and its place in the area.
pub(crate) const KEY_W_TUN: usize = 6;
pub(crate) const MD_TUN: usize = 0;
/// Key words of the IPv6 endpoints and their place.
pub(crate) const KEY_W_TUN_IPV6: usize = 24;
pub(crate) const MD_TUN_IPV6: usize = 32;
/// Key words from byte 256 (connection tuple ports, then GENEVE options) and their place.
pub(crate) const KEY_W_OPTS: usize = 32;
pub(crate) const MD_OPTS_WORDS: usize = 64;
/// Area offset of the first GENEVE option byte.
pub(crate) const MD_GENEVE: usize = MD_OPTS_WORDS + GENEVE_OPTS_OFS - KEY_W_OPTS * 8;

// Fields inside the area (key offset minus 48).
pub(crate) const MD_TUN_ID: usize = MD_TUN;
pub(crate) const MD_IPV4_SRC: usize = MD_TUN + 8;
pub(crate) const MD_IPV4_DST: usize = MD_TUN + 12;
pub(crate) const MD_TOS: usize = MD_TUN + 16;
pub(crate) const MD_TTL: usize = MD_TUN + 17;
pub(crate) const MD_FLAGS: usize = MD_TUN + 18;
pub(crate) const MD_GENEVE_LEN: usize = MD_TUN + 19;
pub(crate) const MD_TP_SRC: usize = MD_TUN + 20;
pub(crate) const MD_TP_DST: usize = MD_TUN + 22;

const _: () = assert!(MD_GENEVE + GENEVE_OPTS_MAX == TNL_MD_LEN);

#[inline(always)]
fn md_word(md: &[u8; TNL_MD_LEN], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&md[at..at + 8]);
    u64::from_ne_bytes(w)
}

/// Bytes of the area that hold data: the first 64, plus the GENEVE option words.
#[inline]
pub fn md_used_len(md: &[u8; TNL_MD_LEN]) -> usize {
    let glen = usize::from(md[MD_GENEVE_LEN]).min(GENEVE_OPTS_MAX);
    if glen == 0 {
        MD_OPTS_WORDS
    } else {
        MD_OPTS_WORDS + (MD_GENEVE - MD_OPTS_WORDS + glen).next_multiple_of(8)
    }
}

/// Copies a packet's tunnel metadata into `key` (the words of the area the packet has).
#[inline]
pub fn md_to_key(md: &[u8; TNL_MD_LEN], which: TnlMd, key: &mut FlowKey) {
    let mut words = 0b111 << KEY_W_TUN;
    for i in 0..3 {
        key.put_word(KEY_W_TUN + i, md_word(md, MD_TUN + 8 * i));
    }
    if which == TnlMd::Ipv6 {
        for i in 0..4 {
            key.put_word(KEY_W_TUN_IPV6 + i, md_word(md, MD_TUN_IPV6 + 8 * i));
        }
        words |= 0b1111 << KEY_W_TUN_IPV6;
    }
    let glen = usize::from(md[MD_GENEVE_LEN]).min(GENEVE_OPTS_MAX);
    if glen > 0 {
        let n = (MD_GENEVE - MD_OPTS_WORDS + glen).div_ceil(8);
        for i in 0..n {
            key.put_word(KEY_W_OPTS + i, md_word(md, MD_OPTS_WORDS + 8 * i));
        }
        words |= (u64::MAX >> (64 - n)) << KEY_W_OPTS;
    }
    key.mark_words(words);
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow::key::FIELDS;

    fn field_ofs(name: &str) -> usize {
        FIELDS
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("{name}"))
            .offset
    }

    #[test]
    fn area_layout_is_the_key_layout() {
        let w6 = KEY_W_TUN * 8;
        for (name, md) in [
            ("tun_id", MD_TUN_ID),
            ("tun_ipv4_src", MD_IPV4_SRC),
            ("tun_ipv4_dst", MD_IPV4_DST),
            ("tun_tos", MD_TOS),
            ("tun_ttl", MD_TTL),
            ("tun_flags", MD_FLAGS),
            ("tun_geneve_len", MD_GENEVE_LEN),
            ("tun_tp_src", MD_TP_SRC),
            ("tun_tp_dst", MD_TP_DST),
        ] {
            assert_eq!(field_ofs(name), w6 + md - MD_TUN, "{name}");
        }
        assert_eq!(field_ofs("tun_ipv6_src"), KEY_W_TUN_IPV6 * 8);
        assert_eq!(field_ofs("tun_ipv6_dst"), KEY_W_TUN_IPV6 * 8 + 16);
        assert_eq!(
            GENEVE_OPTS_OFS,
            KEY_W_OPTS * 8 + (MD_GENEVE - MD_OPTS_WORDS)
        );
        // Words 9 and 10 (dp_hash, mark, conntrack) are not tunnel words.
        assert_eq!(field_ofs("dp_hash"), (KEY_W_TUN + 3) * 8);
    }

    #[test]
    fn metadata_area_round_trips_through_the_key() {
        let mut md = [0xeeu8; TNL_MD_LEN];
        md[..24].copy_from_slice(&[
            0, 0, 0, 0, 0, 0, 0, 0x64, 10, 1, 2, 9, 10, 1, 2, 8, 0x28, 63, 7, 8, 0xc0, 0, 0x12,
            0xb5,
        ]);
        md[MD_OPTS_WORDS..MD_GENEVE].fill(0);
        md[MD_GENEVE..MD_GENEVE + 8].copy_from_slice(&[1, 2, 0x80, 1, 0, 3, 0, 2]);
        let mut k = FlowKey::new();
        k.set_in_port(5);
        md_to_key(&md, TnlMd::Ipv4, &mut k);
        assert_eq!(k.tun_id(), 0x64);
        assert_eq!(k.tun_ipv4_src().octets(), [10, 1, 2, 9]);
        assert_eq!(k.tun_ipv4_dst().octets(), [10, 1, 2, 8]);
        assert_eq!((k.tun_tos(), k.tun_ttl(), k.tun_flags()), (0x28, 63, 7));
        assert_eq!((k.tun_tp_src(), k.tun_tp_dst()), (0xc000, 4789));
        let mut opts = [0u8; GENEVE_OPTS_MAX];
        assert_eq!(k.tun_geneve_opts(&mut opts), 8);
        assert_eq!(&opts[..8], &[1, 2, 0x80, 1, 0, 3, 0, 2]);
        // Nothing else: the bytes after the options and the IPv6 words are not copied.
        assert_eq!(k.map(), 1 | 0b111 << 6 | 0b11 << 32);
        assert_eq!(md_used_len(&md), 80);
        assert_eq!(k.ct_tp_src(), 0);
    }
}
