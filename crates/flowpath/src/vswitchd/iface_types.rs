//! Interface types and their options, from OVS's names to flowpath's ports: what an Interface
//! row becomes and the `error` it gets, in `ovs-vswitchd`'s wording, when it cannot be
//! configured (`NAME: reason`, as `netdev_set_config()` words it) or opened (`could not open
//! network device NAME (strerror)`, as `iface_do_create()` does).
//!
//! | `type` | flowpath port |
//! |---|---|
//! | `""`, `system` | the kernel device NAME through AF_PACKET, or AF_XDP with `other_config:flowpath-netdev=afxdp` (on the Interface, else on Open_vSwitch) |
//! | `internal` | a TAP device (the bridge's own interface is its LOCAL port) |
//! | `tap`, `afxdp` | a TAP device; AF_XDP on the kernel device NAME |
//! | `dpdk` | a DPDK ethdev (`options:dpdk-devargs`, `n_rxq`...; cargo feature `dpdk`) |
//! | `dpdkvhostuser`, `dpdkvhostuserclient` | vhost-user, server socket `RUNDIR/NAME` or the client's `options:vhost-server-path` |
//! | `vxlan`, `geneve`, `gre` | tunnel ports (`remote_ip`, `local_ip`, `key`, `dst_port`, `csum`, `tos`, `df_default`...) |
//! | `patch` | a patch port to `options:peer` |
//! | `dummy`, `pcap`, `replay`, `sink` | in-memory and capture-file ports |
//!
//! With `--enable-dummy` every type backed by a kernel device is a `dummy` port instead, so
//! that tests run without root; with `--enable-dummy=override`, as OVS's, every type but
//! `patch` is (tunnels too, whatever their options).

use std::collections::BTreeMap;
use std::path::Path;

use crate::config::PortConf;
use crate::port_ops::PortBackend;

use super::desired::IfaceDesired;

/// The types flowpath opens, as `Open_vSwitch.iface_types` lists them (`dpdk` when built
/// with DPDK).
pub(crate) const IFACE_TYPES: &[&str] = &[
    "afxdp",
    #[cfg(feature = "dpdk")]
    "dpdk",
    "dpdkvhostuser",
    "dpdkvhostuserclient",
    "dummy",
    "erspan",
    "geneve",
    "gre",
    "internal",
    "ip6erspan",
    "ip6gre",
    "patch",
    "pcap",
    "replay",
    "sink",
    "system",
    "tap",
    "vxlan",
];

/// The knob choosing how a system interface is read (`afpacket`, the default, or `afxdp`).
pub(crate) const NETDEV_KNOB: &str = "flowpath-netdev";

/// Which interface types `--enable-dummy` makes dummy ports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DummyLevel {
    /// None: every type is what it says.
    #[default]
    Off,
    /// `--enable-dummy`: the types backed by a kernel device.
    Kernel,
    /// `--enable-dummy=override`: every type flowpath knows but `patch`.
    Override,
}

impl DummyLevel {
    /// Whether an interface of type `kind` is a dummy port.
    pub fn is_dummy(self, kind: &str) -> bool {
        kind == "dummy"
            || match self {
                DummyLevel::Off => false,
                DummyLevel::Kernel => is_kernel_kind(kind),
                DummyLevel::Override => {
                    kind != "patch" && (is_kernel_kind(kind) || IFACE_TYPES.contains(&kind))
                }
            }
    }
}

/// Whether an interface of type `kind` is backed by a kernel device.
pub(crate) fn is_kernel_kind(kind: &str) -> bool {
    matches!(
        kind,
        "" | "system" | "internal" | "tap" | "afxdp" | "afxdp-nonpmd"
    )
}

/// What the reconciler needs besides the row.
pub(crate) struct TypeContext<'a> {
    /// `--enable-dummy`: which types become dummy ports.
    pub dummy: DummyLevel,
    /// Where vhost-user server sockets go.
    pub rundir: &'a Path,
    /// Open_vSwitch `other_config:flowpath-netdev`.
    pub default_netdev: Option<&'a str>,
}

/// The `error` of a type flowpath does not know, as OVS words it.
pub(crate) fn unknown_type_error(name: &str) -> String {
    format!("could not open network device {name} (Address family not supported by protocol)")
}

/// Opens the port an interface row describes; `Err` is its `error` column. The bridge's own
/// interface is not opened here (see [`open_local`]).
pub(crate) fn open(iface: &IfaceDesired, ctx: &TypeContext) -> Result<PortBackend, String> {
    let name = iface.name.as_str();
    if ctx.dummy.is_dummy(&iface.kind) {
        no_options(iface)?;
        return Ok(PortBackend::Device(Box::new(
            netdev::dummy::DummyPort::new(name),
        )));
    }
    let mut options = iface.options.clone();
    let kind = match iface.kind.as_str() {
        "" | "system" => {
            if !Path::new("/sys/class/net").join(name).exists() {
                return Err(format!(
                    "could not open network device {name} (No such device)"
                ));
            }
            let how = iface
                .other_config
                .get(NETDEV_KNOB)
                .map(String::as_str)
                .or(ctx.default_netdev)
                .unwrap_or("afpacket");
            match how {
                "afpacket" | "afxdp" => how,
                other => {
                    return Err(format!(
                        "{name}: other_config:{NETDEV_KNOB}={other}: expected afpacket or afxdp"
                    ));
                }
            }
        }
        "internal" | "tap" => iface.kind.as_str(),
        "afxdp" | "afxdp-nonpmd" => {
            if let Some(m) = options.remove("xdp-mode") {
                options.insert("xdp_mode".into(), m);
            }
            options.remove("use-need-wakeup");
            "afxdp"
        }
        "dpdkvhostuser" => {
            let path = ctx.rundir.join(name);
            options.insert("vhost-server-path".into(), path.display().to_string());
            "vhostuser"
        }
        "dpdkvhostuserclient" => "vhostuserclient",
        "dpdk" => "dpdk",
        "vxlan" | "geneve" | "gre" | "ip6gre" | "erspan" | "ip6erspan" => {
            let t = crate::config::tunnel_config(&port_conf(iface, iface.kind.as_str(), &options))
                .map_err(|e| format!("{name}: {e}"))?;
            return Ok(PortBackend::Tunnel(t));
        }
        "patch" => return patch(iface).map(PortBackend::Patch),
        "pcap" | "replay" | "sink" => iface.kind.as_str(),
        _ => return Err(unknown_type_error(name)),
    };
    if (kind.starts_with("vhostuser") || kind == "dpdk")
        && let Some(mtu) = iface.mtu_request
    {
        options.insert("mtu_request".into(), mtu.to_string());
    }
    if kind.starts_with("vhostuser")
        && let Some(mac) = &iface.mac
    {
        options.insert("mac".into(), mac.clone());
    }
    let conf = port_conf(iface, kind, &options);
    crate::config::check_port(&conf).map_err(|e| format!("{name}: {e}"))?;
    crate::switch::open_port(&conf, None, Path::new(""))
        .map(PortBackend::Device)
        .map_err(|e| crate::dpdk::ovs_error(&e).unwrap_or_else(|| open_error(name, &e)))
}

/// Opens a bridge's own interface, its LOCAL port: a TAP named as the bridge, or with
/// `--enable-dummy` a device-less internal port.
pub(crate) fn open_local(
    bridge: &str,
    ctx: &TypeContext,
) -> Result<Box<dyn datapath::port::Port>, String> {
    if ctx.dummy != DummyLevel::Off {
        return Ok(Box::new(netdev::dummy::DummyPort::internal(bridge)));
    }
    let conf = port_conf(
        &IfaceDesired {
            name: bridge.to_owned(),
            ..IfaceDesired::default()
        },
        "internal",
        &BTreeMap::new(),
    );
    crate::switch::open_port(&conf, None, Path::new("")).map_err(|e| open_error(bridge, &e))
}

/// `could not open network device NAME (REASON)`, the reason the system's words without
/// Rust's `(os error N)`.
fn open_error(name: &str, e: &anyhow::Error) -> String {
    let root = e.root_cause().to_string();
    let reason = match root.find(" (os error") {
        Some(i) => &root[..i],
        None => &root,
    };
    format!("could not open network device {name} ({reason})")
}

/// A patch port's peer, with OVS's errors (`netdev-vport.c`'s `set_patch_config()`).
fn patch(iface: &IfaceDesired) -> Result<String, String> {
    let name = &iface.name;
    let Some(peer) = iface.options.get("peer") else {
        return Err(format!("{name}: patch type requires valid 'peer' argument"));
    };
    if iface.options.len() > 1 {
        return Err(format!("{name}: patch type takes only a 'peer' argument"));
    }
    if peer == name {
        return Err(format!("{name}: patch peer must not be self"));
    }
    Ok(peer.clone())
}

fn no_options(iface: &IfaceDesired) -> Result<(), String> {
    match iface.options.keys().next() {
        Some(k) if iface.kind == "dummy" => {
            Err(format!("{}: unknown dummy argument '{k}'", iface.name))
        }
        _ => Ok(()),
    }
}

/// The configuration file's form of a port, which `switch::open_port` opens (numbers become
/// integers, as the file would hold them).
fn port_conf(iface: &IfaceDesired, kind: &str, options: &BTreeMap<String, String>) -> PortConf {
    PortConf {
        name: iface.name.clone(),
        kind: kind.to_owned(),
        ofport: None,
        options: options
            .iter()
            .map(|(k, v)| {
                let v = match v.parse::<i64>() {
                    Ok(n) if k != "key" && k != "remote_ip" => toml::Value::Integer(n),
                    _ => toml::Value::String(v.clone()),
                };
                (k.clone(), v)
            })
            .collect(),
        tag: None,
        trunks: Vec::new(),
        vlan_mode: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(name: &str, kind: &str, options: &[(&str, &str)]) -> IfaceDesired {
        IfaceDesired {
            name: name.into(),
            kind: kind.into(),
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..IfaceDesired::default()
        }
    }

    fn ctx() -> TypeContext<'static> {
        TypeContext {
            dummy: DummyLevel::Off,
            rundir: Path::new("/nonexistent"),
            default_netdev: None,
        }
    }

    fn error(i: &IfaceDesired) -> String {
        match open(i, &ctx()) {
            Ok(_) => panic!("{} opened", i.name),
            Err(e) => e,
        }
    }

    #[test]
    fn errors_are_worded_as_ovs_words_them() {
        assert_eq!(
            error(&iface("bogus", "nonesuch", &[])),
            "could not open network device bogus (Address family not supported by protocol)"
        );
        assert_eq!(
            error(&iface("nosuchdev0", "", &[])),
            "could not open network device nosuchdev0 (No such device)"
        );
        assert_eq!(
            error(&iface("p0", "patch", &[])),
            "p0: patch type requires valid 'peer' argument"
        );
        assert_eq!(
            error(&iface("p0", "patch", &[("peer", "p0")])),
            "p0: patch peer must not be self"
        );
    }

    #[test]
    fn tunnels_take_ovn_controllers_options() {
        let i = iface(
            "ovn-hv2-0",
            "geneve",
            &[
                ("csum", "true"),
                ("key", "flow"),
                ("remote_ip", "172.31.0.2"),
                ("local_ip", "172.31.0.1"),
                ("dst_port", "6081"),
                ("df_default", "true"),
            ],
        );
        assert!(matches!(open(&i, &ctx()), Ok(PortBackend::Tunnel(_))));
        let e = error(&iface("v0", "vxlan", &[("remote_ip", "nowhere")]));
        assert!(e.starts_with("v0: "), "{e}");
    }

    #[test]
    fn dummy_overrides_kernel_types_only() {
        let c = TypeContext {
            dummy: DummyLevel::Kernel,
            ..ctx()
        };
        for kind in ["", "system", "internal", "tap", "afxdp"] {
            let o = open(&iface("d0", kind, &[]), &c);
            assert!(matches!(o, Ok(PortBackend::Device(_))), "{kind}");
        }
        assert!(open(&iface("d1", "nonesuch", &[]), &c).is_err());
        // A tunnel stays a tunnel, and needs its remote_ip.
        assert!(open(&iface("v1", "vxlan", &[]), &c).is_err());
    }

    #[test]
    fn dummy_override_covers_every_type_but_patch() {
        let c = TypeContext {
            dummy: DummyLevel::Override,
            ..ctx()
        };
        for kind in ["", "internal", "vxlan", "geneve", "gre", "dpdkvhostuser"] {
            let o = open(&iface("d0", kind, &[]), &c);
            assert!(matches!(o, Ok(PortBackend::Device(_))), "{kind}");
        }
        let o = open(&iface("p0", "patch", &[("peer", "p1")]), &c);
        assert!(matches!(o, Ok(PortBackend::Patch(_))));
        assert!(open(&iface("d1", "nonesuch", &[]), &c).is_err());
    }
}
