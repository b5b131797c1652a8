//! DPDK in the switch: OVS's settings (`dpdk-init`, `dpdk-extra`, `dpdk-socket-mem`,
//! `dpdk-hugepage-dir`, `dpdk-lcore-mask`, from `[datapath]` or `other_config`) start DPDK's
//! environment once, and `type = "dpdk"` ports (`dpdk-devargs`, `n_rxq`, `n_rxq_desc`,
//! `n_txq_desc`, `mtu_request`, `dpdk-lsc-interrupt`, and flowpath's own `n_mbufs`) open
//! through `netdev::dpdk`.
//!
//! DPDK is the cargo feature `dpdk` (off by default, as OVS's `--with-dpdk`). Built without
//! it, `dpdk-init=true` and `dpdk` ports are errors that say so; nothing pretends to work.

use std::collections::BTreeMap;

use anyhow::anyhow;
use datapath::port::Port;

/// The options a `dpdk` port takes.
pub(crate) const PORT_OPTIONS: &[&str] = &[
    "dpdk-devargs",
    "n_rxq",
    "n_rxq_desc",
    "n_txq_desc",
    "mtu_request",
    "dpdk-lsc-interrupt",
    "n_mbufs",
];

/// Why a DPDK request cannot be met by this build.
#[cfg(not(feature = "dpdk"))]
const NOT_BUILT: &str = "flowpath was built without DPDK (cargo feature dpdk)";

/// OVS's DPDK settings, by their names (`dpdk-init`...).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DpdkSettings {
    /// `dpdk-init`: `true`, `try`, or anything else for no DPDK.
    pub init: Option<String>,
    /// `dpdk-extra`, `dpdk-socket-mem`, `dpdk-hugepage-dir`, `dpdk-lcore-mask`.
    pub eal: BTreeMap<&'static str, String>,
}

/// The EAL settings' names.
const EAL_KEYS: &[&str] = &[
    "dpdk-extra",
    "dpdk-socket-mem",
    "dpdk-hugepage-dir",
    "dpdk-lcore-mask",
];

impl DpdkSettings {
    /// The settings among `get`'s keys (an `other_config` map or `[datapath]`).
    pub fn from_keys(get: impl Fn(&str) -> Option<String>) -> DpdkSettings {
        DpdkSettings {
            init: get("dpdk-init"),
            eal: EAL_KEYS
                .iter()
                .filter_map(|k| get(k).map(|v| (*k, v)))
                .collect(),
        }
    }

    /// Whether DPDK is asked for (`dpdk-init` is `true` or `try`).
    pub fn wanted(&self) -> bool {
        matches!(self.init.as_deref(), Some("true" | "try"))
    }
}

/// Starts DPDK when `s` asks for it. A failure with `dpdk-init=true` is an error naming the
/// cause; with `try` it is only logged (then `dpdk` ports fail one by one).
pub(crate) fn start(s: &DpdkSettings) -> anyhow::Result<()> {
    if !s.wanted() {
        return Ok(());
    }
    let strict = s.init.as_deref() == Some("true");
    let result = start_eal(s);
    match result {
        Ok(()) => Ok(()),
        Err(e) if strict => Err(anyhow!("dpdk-init=true: {e}")),
        Err(e) => {
            warn(&format!("dpdk-init=try: going on without DPDK: {e}"));
            Ok(())
        }
    }
}

fn warn(msg: &str) {
    match vlog::module("dpdk") {
        Some(m) => m.log(vlog::Level::Warn, msg),
        None => eprintln!("flowpath: {msg}"),
    }
}

#[cfg(feature = "dpdk")]
fn start_eal(s: &DpdkSettings) -> Result<(), String> {
    let get = |k: &str| s.eal.get(k).cloned();
    let opts = netdev::dpdk::EalOptions {
        extra: get("dpdk-extra"),
        socket_mem: get("dpdk-socket-mem"),
        hugepage_dir: get("dpdk-hugepage-dir"),
        lcore_mask: get("dpdk-lcore-mask"),
    };
    netdev::dpdk::Eal::init(&opts)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[cfg(not(feature = "dpdk"))]
fn start_eal(_: &DpdkSettings) -> Result<(), String> {
    Err(NOT_BUILT.to_owned())
}

/// Whether DPDK runs, and its version, for `Open_vSwitch`'s `dpdk_initialized` and
/// `dpdk_version` (`none` without DPDK, as OVS writes).
pub(crate) fn status() -> (bool, String) {
    #[cfg(feature = "dpdk")]
    if let Some(eal) = netdev::dpdk::Eal::get() {
        return (true, eal.version.clone());
    }
    (false, "none".to_owned())
}

/// The Interface `error` OVS writes for `e`, where it has its own words
/// (`netdev_dpdk_process_devargs`): a `dpdk-devargs` that does not attach (`Error attaching
/// device 'ARGS' to DPDK`) or names a device another port has (`'NAME' is trying to use
/// device 'ARGS' which is already in use by 'OTHER'`).
pub(crate) fn ovs_error(e: &anyhow::Error) -> Option<String> {
    #[cfg(feature = "dpdk")]
    {
        use netdev::dpdk::DpdkError;
        match e.downcast_ref::<DpdkError>() {
            Some(DpdkError::Devargs { devargs, .. }) => {
                return Some(format!("Error attaching device '{devargs}' to DPDK"));
            }
            Some(in_use @ DpdkError::InUse { .. }) => return Some(in_use.to_string()),
            _ => {}
        }
    }
    let _ = e;
    None
}

/// Checks a `dpdk` port's options without opening anything; built without DPDK, a `dpdk`
/// port is an error here already (`check-config` says so).
pub(crate) fn check_options(options: &[(String, String)]) -> Result<(), String> {
    for (k, _) in options {
        if !PORT_OPTIONS.contains(&k.as_str()) {
            return Err(format!(
                "unknown option '{k}' for type dpdk (known: {})",
                PORT_OPTIONS.join(", ")
            ));
        }
    }
    if !options.iter().any(|(k, _)| k == "dpdk-devargs") {
        return Err("type dpdk needs option dpdk-devargs".into());
    }
    #[cfg(feature = "dpdk")]
    port_options(options).map_err(|e| e.to_string())?;
    #[cfg(not(feature = "dpdk"))]
    return Err(NOT_BUILT.to_owned());
    #[cfg(feature = "dpdk")]
    Ok(())
}

#[cfg(feature = "dpdk")]
fn port_options(
    options: &[(String, String)],
) -> Result<netdev::dpdk::DpdkPortOptions, netdev::dpdk::DpdkError> {
    let mut o = netdev::dpdk::DpdkPortOptions::new("");
    for (k, v) in options {
        o.set(k, v)?;
    }
    Ok(o)
}

/// Opens `dpdk` port `name` with `options`.
pub(crate) fn open_port(name: &str, options: &[(String, String)]) -> anyhow::Result<Box<dyn Port>> {
    check_options(options).map_err(|e| anyhow!("port {name}: {e}"))?;
    #[cfg(feature = "dpdk")]
    {
        let o = port_options(options)?;
        Ok(Box::new(netdev::dpdk::DpdkPort::open(name, &o)?))
    }
    // check_options refused it already.
    #[cfg(not(feature = "dpdk"))]
    unreachable!("a dpdk port in a build without DPDK")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(kv: &[(&str, &str)]) -> Vec<(String, String)> {
        kv.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn port_options_are_ovs_names() {
        assert_eq!(
            check_options(&opts(&[("dpdk-devargs", "net_null0"), ("n_rxq", "2")])).is_ok(),
            cfg!(feature = "dpdk")
        );
        let e = check_options(&opts(&[("devargs", "x")])).unwrap_err();
        assert!(
            e.starts_with("unknown option 'devargs' for type dpdk"),
            "{e}"
        );
        let e = check_options(&opts(&[("n_rxq", "2")])).unwrap_err();
        assert_eq!(e, "type dpdk needs option dpdk-devargs");
    }

    #[test]
    fn settings_come_by_ovs_names_and_nothing_starts_unasked() {
        let m: BTreeMap<&str, &str> = [("dpdk-init", "false"), ("dpdk-socket-mem", "1024")].into();
        let s = DpdkSettings::from_keys(|k| m.get(k).map(|v| (*v).to_owned()));
        assert!(!s.wanted());
        assert_eq!(
            s.eal.get("dpdk-socket-mem").map(String::as_str),
            Some("1024")
        );
        assert!(start(&s).is_ok());
    }

    #[cfg(not(feature = "dpdk"))]
    #[test]
    fn without_the_feature_dpdk_is_refused_plainly() {
        let s = DpdkSettings {
            init: Some("true".into()),
            ..DpdkSettings::default()
        };
        let e = start(&s).unwrap_err().to_string();
        assert_eq!(
            e,
            "dpdk-init=true: flowpath was built without DPDK (cargo feature dpdk)"
        );
        let s = DpdkSettings {
            init: Some("try".into()),
            ..DpdkSettings::default()
        };
        assert!(start(&s).is_ok());
        let e = open_port("d0", &opts(&[("dpdk-devargs", "net_null0")]))
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            e,
            "port d0: flowpath was built without DPDK (cargo feature dpdk)"
        );
        let e = check_options(&opts(&[("dpdk-devargs", "net_null0")])).unwrap_err();
        assert_eq!(e, "flowpath was built without DPDK (cargo feature dpdk)");
        assert_eq!(status(), (false, "none".to_owned()));
    }
}
