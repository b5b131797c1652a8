//! An interface's `bfd` column (OVS 3.1's `vswitch.xml`, keys and defaults as `ovs-vswitchd`
//! reads them).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use flow::EthAddr;

/// The default detect multiplier.
pub const DEFAULT_MULT: u8 = 3;
/// `bfd_src_ip`'s default.
pub const DEFAULT_SRC_IP: Ipv4Addr = Ipv4Addr::new(169, 254, 1, 1);
/// `bfd_dst_ip`'s default.
pub const DEFAULT_DST_IP: Ipv4Addr = Ipv4Addr::new(169, 254, 1, 0);

/// A session's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// `min_rx` in milliseconds (default 1000).
    pub min_rx: i64,
    /// `min_tx` in milliseconds (default 100).
    pub min_tx: i64,
    /// `decay_min_rx` in milliseconds (0: no decay).
    pub decay_min_rx: i64,
    pub forwarding_if_rx: bool,
    pub cpath_down: bool,
    pub check_tnl_key: bool,
    pub local_src_mac: Option<EthAddr>,
    pub local_dst_mac: Option<EthAddr>,
    pub remote_dst_mac: Option<EthAddr>,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub oam: bool,
    /// `mult` (1 to 255, default 3).
    pub mult: u8,
}

/// `smap_get_bool()`: only "true" is true.
fn get_bool(m: &BTreeMap<String, String>, k: &str) -> bool {
    m.get(k).is_some_and(|v| v == "true")
}

/// `smap_get_int()`: the default when missing or not a number.
fn get_int(m: &BTreeMap<String, String>, k: &str, def: i64) -> i64 {
    m.get(k)
        .and_then(|v| v.trim().parse::<i32>().ok())
        .map_or(def, i64::from)
}

fn get_mac(m: &BTreeMap<String, String>, k: &str) -> Option<EthAddr> {
    let v = m.get(k)?;
    let bytes: Vec<u8> = v
        .split(':')
        .map(|h| u8::from_str_radix(h, 16))
        .collect::<Result<_, _>>()
        .ok()?;
    let a: [u8; 6] = bytes.try_into().ok()?;
    (a != [0; 6]).then_some(EthAddr(a))
}

fn get_ip(m: &BTreeMap<String, String>, k: &str, def: Ipv4Addr) -> Ipv4Addr {
    m.get(k)
        .filter(|v| !v.is_empty())
        .and_then(|v| v.parse().ok())
        .unwrap_or(def)
}

impl Config {
    /// The configuration of column `bfd`; `None` unless `enable=true`.
    pub fn from_column(m: &BTreeMap<String, String>) -> Option<Config> {
        if !get_bool(m, "enable") {
            return None;
        }
        let mult = get_int(m, "mult", i64::from(DEFAULT_MULT));
        let min_rx = get_int(m, "min_rx", 1000).max(1);
        let decay = get_int(m, "decay_min_rx", 0);
        Some(Config {
            min_rx,
            min_tx: get_int(m, "min_tx", 100).max(1),
            // As OVS (which warns): a decay below min_rx is no decay.
            decay_min_rx: if decay > 0 && decay < min_rx {
                0
            } else {
                decay
            },
            forwarding_if_rx: get_bool(m, "forwarding_if_rx"),
            cpath_down: get_bool(m, "cpath_down"),
            check_tnl_key: get_bool(m, "check_tnl_key"),
            local_src_mac: get_mac(m, "bfd_local_src_mac"),
            local_dst_mac: get_mac(m, "bfd_local_dst_mac"),
            remote_dst_mac: get_mac(m, "bfd_remote_dst_mac"),
            src_ip: get_ip(m, "bfd_src_ip", DEFAULT_SRC_IP),
            dst_ip: get_ip(m, "bfd_dst_ip", DEFAULT_DST_IP),
            oam: get_bool(m, "oam"),
            mult: u8::try_from(mult)
                .ok()
                .filter(|m| *m >= 1)
                .unwrap_or(DEFAULT_MULT),
        })
    }

    /// What translation needs to recognise the session's packets.
    pub fn rx_filter(&self) -> RxFilter {
        RxFilter {
            remote_dst_mac: self.remote_dst_mac,
            src_ip: (self.src_ip != DEFAULT_SRC_IP).then_some(self.src_ip),
            check_tnl_key: self.check_tnl_key,
        }
    }
}

/// Which received packets are the session's (OVS's `bfd_should_process_flow()`): UDP to port
/// 3784 over IPv4, not a later fragment, to `remote_dst_mac` and to `src_ip` when they are
/// configured, with tunnel key 0 under `check_tnl_key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxFilter {
    pub remote_dst_mac: Option<EthAddr>,
    /// `bfd_src_ip` when it is not the default (the default accepts any destination).
    pub src_ip: Option<Ipv4Addr>,
    pub check_tnl_key: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn defaults_are_ovs_s() {
        assert_eq!(Config::from_column(&col(&[("enable", "false")])), None);
        assert_eq!(Config::from_column(&col(&[("min_rx", "5")])), None);
        let c = Config::from_column(&col(&[("enable", "true")])).unwrap();
        assert_eq!(
            (c.min_rx, c.min_tx, c.decay_min_rx, c.mult),
            (1000, 100, 0, 3)
        );
        assert_eq!((c.src_ip, c.dst_ip), (DEFAULT_SRC_IP, DEFAULT_DST_IP));
        assert_eq!(c.rx_filter().src_ip, None);
    }

    #[test]
    fn odd_values_fall_back_as_ovs_s() {
        let c = Config::from_column(&col(&[
            ("enable", "true"),
            ("min_rx", "0"),
            ("min_tx", "x"),
            ("mult", "300"),
            ("decay_min_rx", "500"),
            ("bfd_src_ip", "nonsense"),
            ("bfd_local_src_mac", "00:11:22:33:44:55"),
        ]))
        .unwrap();
        assert_eq!((c.min_rx, c.min_tx, c.mult), (1, 100, 3));
        assert_eq!(c.decay_min_rx, 500);
        assert_eq!(c.src_ip, DEFAULT_SRC_IP);
        assert_eq!(
            c.local_src_mac,
            Some(EthAddr([0, 0x11, 0x22, 0x33, 0x44, 0x55]))
        );
        let c = Config::from_column(&col(&[("enable", "true"), ("decay_min_rx", "500")]));
        assert_eq!(c.unwrap().decay_min_rx, 0);
    }
}
