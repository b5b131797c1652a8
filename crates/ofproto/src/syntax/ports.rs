//! OpenFlow port numbers and names in flow syntax.
//!
//! Ports are OpenFlow 1.0 numbers, the 16-bit space OVS uses internally and prints: physical
//! ports below `0xff00`, reserved ports from `0xfff8` (`IN_PORT`) to `0xffff` (`ANY`, also
//! accepted as `NONE`). OpenFlow 1.1+ numbers (`0xffffff00` and up) are accepted and mapped
//! down, as `ovs-ofctl` does (`4294967294` is `LOCAL`).

use std::fmt::Write;

use super::lex::parse_decimal;

/// Reserved port: `UNSET` (only meaningful for `actset_output`).
pub const OFPP_UNSET: u32 = 0xfff7;
/// Reserved port: the packet's input port.
pub const OFPP_IN_PORT: u32 = 0xfff8;
/// Reserved port: the flow table (packet-out only).
pub const OFPP_TABLE: u32 = 0xfff9;
/// Reserved port: L2 learning switch processing.
pub const OFPP_NORMAL: u32 = 0xfffa;
/// Reserved port: all ports except the input port and those with flooding disabled.
pub const OFPP_FLOOD: u32 = 0xfffb;
/// Reserved port: all ports except the input port.
pub const OFPP_ALL: u32 = 0xfffc;
/// Reserved port: the controller.
pub const OFPP_CONTROLLER: u32 = 0xfffd;
/// Reserved port: the bridge's local port.
pub const OFPP_LOCAL: u32 = 0xfffe;
/// Reserved port: no port (`ANY`, `NONE`).
pub const OFPP_ANY: u32 = 0xffff;
/// First number that is not a physical port.
pub const OFPP_MAX: u32 = 0xff00;

/// Reserved port names in the order OVS lists them, with `NONE` accepted for `ANY`.
const RESERVED: [(&str, u32); 10] = [
    ("IN_PORT", OFPP_IN_PORT),
    ("TABLE", OFPP_TABLE),
    ("NORMAL", OFPP_NORMAL),
    ("FLOOD", OFPP_FLOOD),
    ("ALL", OFPP_ALL),
    ("CONTROLLER", OFPP_CONTROLLER),
    ("LOCAL", OFPP_LOCAL),
    ("ANY", OFPP_ANY),
    ("UNSET", OFPP_UNSET),
    ("NONE", OFPP_ANY),
];

/// Port names for parsing (and optionally printing) flows: `in_port=p0`, `output:p1`.
///
/// Any `Fn(&str) -> Option<u32>` is a resolver; [`NoPortNames`] knows none.
pub trait PortNames {
    /// The OpenFlow number of port `name`.
    fn port_number(&self, name: &str) -> Option<u32>;
    /// The name to print for port `number`, if printing with names.
    fn port_name(&self, _number: u32) -> Option<&str> {
        None
    }
}

impl<F: Fn(&str) -> Option<u32>> PortNames for F {
    fn port_number(&self, name: &str) -> Option<u32> {
        self(name)
    }
}

/// A resolver that knows no names: ports are numbers or reserved names only.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoPortNames;

impl PortNames for NoPortNames {
    fn port_number(&self, _name: &str) -> Option<u32> {
        None
    }
}

/// The reserved name of `port`, if it has one.
pub fn reserved_port_name(port: u32) -> Option<&'static str> {
    RESERVED[..9]
        .iter()
        .find(|&&(_, n)| n == port)
        .map(|&(name, _)| name)
}

/// Parses a port as `ovs-ofctl` does (`ofputil_port_from_string()`): a decimal number, a
/// reserved name (any case), or a name the resolver knows (optionally in double quotes).
pub fn parse_port(s: &str, names: &dyn PortNames) -> Option<u32> {
    if s.starts_with('-') {
        return None;
    }
    if let Ok(n) = parse_decimal(s, u128::from(u32::MAX)) {
        let n = n as u32;
        return match n {
            0..=0xffff => Some(n),
            0xffff_ff00..=0xffff_ffff => Some(n - 0xffff_0000),
            _ => None,
        };
    }
    if let Some(&(_, n)) = RESERVED
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(s))
    {
        return Some(n);
    }
    let name = match s.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
        Some(inner) => unescape(inner)?,
        None => s.to_string(),
    };
    names.port_number(&name)
}

fn unescape(s: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                c => out.push(c),
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// Appends `port` as OVS prints it: reserved ports by name, named ports by name (quoted when
/// the name is not a simple identifier), others as decimal numbers.
pub fn format_port(out: &mut String, port: u32, names: &dyn PortNames) {
    if let Some(name) = reserved_port_name(port) {
        out.push_str(name);
    } else if let Some(name) = names.port_name(port) {
        let simple = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && name.chars().all(|c| c.is_ascii_alphanumeric());
        if simple {
            out.push_str(name);
        } else {
            out.push('"');
            for c in name.chars() {
                match c {
                    '"' | '\\' => {
                        out.push('\\');
                        out.push(c);
                    }
                    '\n' => out.push_str("\\n"),
                    '\t' => out.push_str("\\t"),
                    c => out.push(c),
                }
            }
            out.push('"');
        }
    } else {
        let _ = write!(out, "{port}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_ports_and_numbers() {
        let names = |n: &str| (n == "p0").then_some(7);
        assert_eq!(parse_port("LOCAL", &names), Some(0xfffe));
        assert_eq!(parse_port("local", &names), Some(0xfffe));
        assert_eq!(parse_port("none", &names), Some(0xffff));
        assert_eq!(parse_port("ANY", &names), Some(0xffff));
        assert_eq!(parse_port("in_port", &names), Some(0xfff8));
        assert_eq!(parse_port("65534", &names), Some(0xfffe));
        assert_eq!(parse_port("4294967294", &names), Some(0xfffe));
        assert_eq!(parse_port("70000", &names), None);
        assert_eq!(parse_port("0x5", &names), None);
        assert_eq!(parse_port("-1", &names), None);
        assert_eq!(parse_port("p0", &names), Some(7));
        assert_eq!(parse_port("\"p0\"", &names), Some(7));
        assert_eq!(parse_port("p1", &names), None);
        let mut s = String::new();
        format_port(&mut s, 0xfffe, &NoPortNames);
        s.push(',');
        format_port(&mut s, 5, &NoPortNames);
        assert_eq!(s, "LOCAL,5");
    }
}
