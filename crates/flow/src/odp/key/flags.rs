//! Flag sets of the key text: `ct_state(+new+trk)`, `tcp_flags(syn|ack)` and the tunnel's
//! `flags(-df+csum+key)`, printed as OVS's `format_flags()`/`format_flags_masked()` print them
//! and parsed in the three forms OVS's `parse_flags()` accepts (`V/M`, `+a-b`, `a|b`).
//!
//! The tunnel flags use OVS's bit values (`FLOW_TNL_F_*`) in the text and are mapped to and
//! from the key's own [`tun_flags`] bits here.

use std::fmt::Write;

use super::format::chomp;
use crate::key::tun_flags;
use crate::odp::parse::{Cursor, PResult};

/// (bit, name) in OVS's print order (lowest bit first).
pub type FlagTable = &'static [(u32, &'static str)];

/// Connection-state flag names (`ct_state_to_string()`).
pub const CT_STATE_FLAGS: FlagTable = &[
    (0x01, "new"),
    (0x02, "est"),
    (0x04, "rel"),
    (0x08, "rpl"),
    (0x10, "inv"),
    (0x20, "trk"),
    (0x40, "snat"),
    (0x80, "dnat"),
];
/// TCP flag names (`packet_tcp_flag_to_string()`).
pub const TCP_FLAG_NAMES: FlagTable = &[
    (0x001, "fin"),
    (0x002, "syn"),
    (0x004, "rst"),
    (0x008, "psh"),
    (0x010, "ack"),
    (0x020, "urg"),
    (0x040, "ece"),
    (0x080, "cwr"),
    (0x100, "ns"),
    (0x200, "[200]"),
    (0x400, "[400]"),
    (0x800, "[800]"),
];
/// Tunnel flags with OVS's bit values (`FLOW_TNL_F_*`), which differ from [`tun_flags`].
pub const TUN_FLAG_NAMES: FlagTable = &[(0x1, "oam"), (0x2, "df"), (0x4, "csum"), (0x8, "key")];
const TUN_FLAG_MAP: [(u32, u8); 4] = [
    (0x1, tun_flags::OAM),
    (0x2, tun_flags::DONT_FRAGMENT),
    (0x4, tun_flags::CSUM),
    (0x8, tun_flags::KEY),
];

/// Datapath tunnel flags ([`crate::key::tun_flags`]) in OVS's bit order, which
/// [`TUN_FLAG_NAMES`] names: oam, df, csum, key.
pub fn tun_flags_to_ovs(v: u8) -> u32 {
    TUN_FLAG_MAP
        .iter()
        .filter(|(_, ours)| v & ours != 0)
        .fold(0, |a, (o, _)| a | o)
}

pub(super) fn tun_flags_from_ovs(v: u32) -> u8 {
    TUN_FLAG_MAP
        .iter()
        .filter(|(o, _)| v & o != 0)
        .fold(0, |a, (_, ours)| a | ours)
}

fn flag_name(t: FlagTable, bit: u32) -> Option<&'static str> {
    t.iter().find(|(b, _)| *b == bit).map(|(_, n)| *n)
}

/// OVS `format_flags(.., '|')`.
pub(super) fn put_flags(out: &mut String, t: FlagTable, flags: u32) {
    if flags == 0 {
        out.push('0');
        return;
    }
    let mut bad = 0;
    let mut f = flags;
    while f != 0 {
        let bit = f & f.wrapping_neg();
        match flag_name(t, bit) {
            Some(n) => {
                out.push_str(n);
                out.push('|');
            }
            None => bad |= bit,
        }
        f &= !bit;
    }
    if bad != 0 {
        let _ = write!(out, "{bad:#x}|");
    }
    chomp(out, '|');
}

/// OVS `format_flags_masked()`.
pub(super) fn put_flags_masked(out: &mut String, t: FlagTable, flags: u32, mask: u32, max: u32) {
    if mask == max {
        put_flags(out, t, flags);
    } else if mask == 0 {
        out.push_str("0/0");
    } else {
        let mut m = mask;
        while m != 0 {
            let bit = m & m.wrapping_neg();
            out.push(if flags & bit != 0 { '+' } else { '-' });
            out.push_str(flag_name(t, bit).unwrap_or("[Unknown]"));
            m &= !bit;
        }
    }
}

/// Parsed flags: value, mask (`u32::MAX` for the unmasked forms) and whether the numeric
/// `value/mask` form was used.
pub(super) struct Flags {
    pub(super) value: u32,
    pub(super) mask: u32,
    pub(super) numeric: bool,
}

/// OVS `parse_flags()` up to (not including) the closing ')': `V/M`, `+a-b`, or `a|b`.
pub(super) fn parse_flags(
    c: &mut Cursor<'_>,
    t: FlagTable,
    allowed: u32,
    what: &'static str,
) -> PResult<Flags> {
    let start = c.pos;
    if c.peek().is_some_and(|b| b.is_ascii_digit()) {
        let v = c.u32(what)?;
        let (value, mask) = if c.eat(b'/') {
            (v, c.u32(what)?)
        } else {
            (v, u32::MAX)
        };
        if value & !allowed != 0 || (mask != u32::MAX && mask & !allowed != 0) {
            return Err(c.invalid_at(start, format!("unknown {what} flag bits")));
        }
        return Ok(Flags {
            value,
            mask,
            numeric: true,
        });
    }
    let name_at = |c: &mut Cursor<'_>| -> Option<u32> {
        // Longest name first would matter only if one name prefixed another followed by a
        // delimiter; OVS's names do not, so first match wins, as in OVS.
        for &(bit, name) in t {
            let r = c.rest().as_bytes();
            if r.starts_with(name.as_bytes())
                && matches!(r.get(name.len()), Some(b'+' | b'-' | b'|' | b')') | None)
            {
                c.pos += name.len();
                return Some(bit);
            }
        }
        None
    };
    if matches!(c.peek(), Some(b'+' | b'-')) {
        let (mut value, mut mask) = (0, 0);
        while let Some(sign @ (b'+' | b'-')) = c.peek() {
            c.pos += 1;
            let at = c.pos;
            let bit = name_at(c).ok_or_else(|| c.expected(format!("{what} flag name")))?;
            if mask & bit != 0 {
                return Err(c.invalid_at(at, format!("{what} flag given twice")));
            }
            if bit & allowed == 0 {
                return Err(c.invalid_at(at, format!("{what} flag not allowed here")));
            }
            mask |= bit;
            if sign == b'+' {
                value |= bit;
            }
        }
        return Ok(Flags {
            value,
            mask,
            numeric: false,
        });
    }
    let mut value = 0;
    while c.peek() != Some(b')') && !c.at_end() {
        let at = c.pos;
        let bit = if c.peek().is_some_and(|b| b.is_ascii_digit()) {
            let v = c.u32(what)?;
            if v & !allowed != 0 {
                return Err(c.invalid_at(at, format!("unknown {what} flag bits")));
            }
            v
        } else {
            name_at(c).ok_or_else(|| c.expected(format!("{what} flag name, '+' or '-'")))?
        };
        value |= bit;
        if !c.eat(b'|') {
            break;
        }
    }
    Ok(Flags {
        value,
        mask: u32::MAX,
        numeric: false,
    })
}
