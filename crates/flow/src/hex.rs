//! Bytes written in hex, as Open vSwitch's tools and tests write packets and action data: pairs
//! of hex digits, with spaces, tabs, line breaks and dots allowed before each pair
//! (`50540000000a 0800 45...`, `01.02.03`), OVS's `ofpbuf_put_hex()` and `eth_from_hex()`.

/// The bytes of the hex pairs at the start of `s`, and what follows them: where the first
/// character that is not a separator or a pair of hex digits stands (empty when all was hex).
pub fn put_hex(s: &str) -> (Vec<u8>, &str) {
    let mut out = Vec::with_capacity(s.len() / 2);
    let mut rest = s;
    loop {
        rest = rest.trim_start_matches([' ', '.', '\t', '\r', '\n']);
        let b = rest.as_bytes();
        let pair = match (b.first(), b.get(1)) {
            (Some(&h), Some(&l)) => (char::from(h).to_digit(16), char::from(l).to_digit(16)),
            _ => (None, None),
        };
        let (Some(h), Some(l)) = pair else {
            return (out, rest);
        };
        out.push((h << 4 | l) as u8);
        rest = &rest[2..];
    }
}

/// All of `s` as hex bytes, or `None` when something else is in it.
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    match put_hex(s) {
        (bytes, "") => Some(bytes),
        _ => None,
    }
}

/// An Ethernet frame written in hex, with OVS's errors: `Trailing garbage in packet data` when
/// something else follows the hex, `Packet data too short for Ethernet` below 14 bytes.
pub fn eth_from_hex(s: &str) -> Result<Vec<u8>, &'static str> {
    let bytes = from_hex(s).ok_or("Trailing garbage in packet data")?;
    if bytes.len() < 14 {
        return Err("Packet data too short for Ethernet");
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_between_pairs_and_ovs_s_errors() {
        assert_eq!(put_hex("01.02 03\n\t04zz"), (vec![1, 2, 3, 4], "zz"));
        assert_eq!(put_hex("0"), (vec![], "0"));
        assert_eq!(put_hex("0 1"), (vec![], "0 1"));
        assert_eq!(from_hex(". 0a0B "), Some(vec![10, 11]));
        assert_eq!(from_hex("0g"), None);
        let frame = "505400000007 606666666600 8847 00014020";
        assert_eq!(eth_from_hex(frame).unwrap().len(), 18);
        assert_eq!(
            eth_from_hex("5054000000076066666666008847 x"),
            Err("Trailing garbage in packet data")
        );
        assert_eq!(
            eth_from_hex("50540000000760666666"),
            Err("Packet data too short for Ethernet")
        );
        assert_eq!(from_hex("é1"), None);
    }
}
