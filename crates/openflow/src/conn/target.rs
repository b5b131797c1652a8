//! Connection targets in Open vSwitch's syntax: the active `tcp:IP[:PORT]` and `unix:PATH`
//! a switch connects to (a controller), and the passive `ptcp:[PORT][:IP]` and `punix:PATH` it
//! listens on (service connections such as `ovs-ofctl`'s).
//!
//! Unix-domain paths are confined to the switch's run directory, as `ovs-vswitchd` confines
//! them: a relative path is taken inside it, and a path that leaves it is refused, so that a
//! controller target written into the database cannot make the switch create or connect to an
//! arbitrary file. Every bridge listens on `punix:RUNDIR/BRIDGE.mgmt` and
//! `punix:RUNDIR/BRIDGE.snoop` ([`bridge_targets`]).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Component, Path, PathBuf};

/// The IANA port for OpenFlow, the default of `tcp:` and `ptcp:`.
pub const OFP_PORT: u16 = 6653;

/// Where a connection goes or comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// `tcp:IP[:PORT]`: connect to a controller over TCP.
    Tcp(SocketAddr),
    /// `unix:PATH`: connect over a Unix-domain socket.
    Unix(PathBuf),
    /// `ptcp:[PORT][:IP]`: listen for TCP connections (port 0: any free port).
    PTcp(SocketAddr),
    /// `punix:PATH`: listen on a Unix-domain socket.
    PUnix(PathBuf),
}

/// Why a target was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// No `TYPE:` prefix, or one OVS does not know.
    #[error("{0}: unknown connection type (expected tcp:, unix:, ptcp: or punix:)")]
    UnknownType(String),
    /// `ssl:` and `pssl:`, which need TLS this switch does not have yet.
    #[error("{0}: SSL connections are not supported")]
    SslUnsupported(String),
    /// An address that is not an IPv4 or a bracketed IPv6 literal.
    #[error("{0}: bad IP address \"{1}\"")]
    BadAddress(String, String),
    /// A port that is not a number from 0 to 65535 (1 to 65535 for an active target).
    #[error("{0}: bad port number \"{1}\"")]
    BadPort(String, String),
    /// A Unix-domain target with no path.
    #[error("{0}: missing socket path")]
    MissingPath(String),
    /// A Unix-domain path that leaves the run directory.
    #[error("{0}: path outside the run directory {1} is not allowed")]
    OutsideRundir(String, String),
}

impl Target {
    /// Parses `s` in OVS's syntax; relative Unix-domain paths are taken inside `rundir`, and
    /// paths outside it are refused.
    pub fn parse(s: &str, rundir: &Path) -> Result<Target, TargetError> {
        let (kind, rest) = s
            .split_once(':')
            .ok_or_else(|| TargetError::UnknownType(s.to_string()))?;
        match kind {
            "tcp" => parse_active_inet(s, rest).map(Target::Tcp),
            "ptcp" => parse_passive_inet(s, rest).map(Target::PTcp),
            "unix" => confine(s, rest, rundir).map(Target::Unix),
            "punix" => confine(s, rest, rundir).map(Target::PUnix),
            "ssl" | "pssl" => Err(TargetError::SslUnsupported(s.to_string())),
            _ => Err(TargetError::UnknownType(s.to_string())),
        }
    }

    /// Whether the target is a listener (`ptcp:`, `punix:`).
    pub fn is_passive(&self) -> bool {
        matches!(self, Target::PTcp(_) | Target::PUnix(_))
    }
}

impl fmt::Display for Target {
    /// As OVS writes targets: `tcp:127.0.0.1:6653`, `ptcp:6653:0.0.0.0`, `tcp:[::1]:6653`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Tcp(a) => write!(f, "tcp:{a}"),
            Target::Unix(p) => write!(f, "unix:{}", p.display()),
            Target::PTcp(a) => match a.ip() {
                IpAddr::V4(ip) => write!(f, "ptcp:{}:{ip}", a.port()),
                IpAddr::V6(ip) => write!(f, "ptcp:{}:[{ip}]", a.port()),
            },
            Target::PUnix(p) => write!(f, "punix:{}", p.display()),
        }
    }
}

/// The two listeners every bridge has: `punix:RUNDIR/BRIDGE.mgmt` (for `ovs-ofctl` and
/// `ovn-controller`) and `punix:RUNDIR/BRIDGE.snoop` (for `ovs-ofctl snoop`).
pub fn bridge_targets(rundir: &Path, bridge: &str) -> [Target; 2] {
    [
        Target::PUnix(rundir.join(format!("{bridge}.mgmt"))),
        Target::PUnix(rundir.join(format!("{bridge}.snoop"))),
    ]
}

/// `IP[:PORT]`, the port defaulting to [`OFP_PORT`]; an IPv6 address in brackets.
fn parse_active_inet(s: &str, rest: &str) -> Result<SocketAddr, TargetError> {
    let (host, port) = split_host_port(s, rest)?;
    let ip = parse_ip(s, host)?;
    let port = match port {
        None => OFP_PORT,
        Some(p) => match parse_port(s, p)? {
            0 => return Err(TargetError::BadPort(s.to_string(), p.to_string())),
            n => n,
        },
    };
    Ok(SocketAddr::new(ip, port))
}

/// `[PORT][:IP]`: the port defaulting to [`OFP_PORT`], the address to every IPv4 address.
fn parse_passive_inet(s: &str, rest: &str) -> Result<SocketAddr, TargetError> {
    let (port, host) = match rest.split_once(':') {
        Some((p, h)) => (p, Some(h)),
        None => (rest, None),
    };
    let port = if port.is_empty() {
        OFP_PORT
    } else {
        parse_port(s, port)?
    };
    let ip = match host {
        None | Some("") => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        Some(h) => parse_ip(s, h)?,
    };
    Ok(SocketAddr::new(ip, port))
}

/// Splits `HOST[:PORT]` where HOST may be a bracketed IPv6 address.
fn split_host_port<'a>(s: &str, rest: &'a str) -> Result<(&'a str, Option<&'a str>), TargetError> {
    if let Some(v6) = rest.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| TargetError::BadAddress(s.to_string(), rest.to_string()))?;
        return match after {
            "" => Ok((host, None)),
            _ => match after.strip_prefix(':') {
                Some(p) => Ok((host, Some(p))),
                None => Err(TargetError::BadAddress(s.to_string(), rest.to_string())),
            },
        };
    }
    Ok(match rest.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (rest, None),
    })
}

fn parse_ip(s: &str, host: &str) -> Result<IpAddr, TargetError> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse()
        .map_err(|_| TargetError::BadAddress(s.to_string(), host.to_string()))
}

fn parse_port(s: &str, port: &str) -> Result<u16, TargetError> {
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(TargetError::BadPort(s.to_string(), port.to_string()));
    }
    port.parse()
        .map_err(|_| TargetError::BadPort(s.to_string(), port.to_string()))
}

/// The path of a Unix-domain target, inside `rundir` or refused.
fn confine(s: &str, path: &str, rundir: &Path) -> Result<PathBuf, TargetError> {
    if path.is_empty() {
        return Err(TargetError::MissingPath(s.to_string()));
    }
    let outside = || TargetError::OutsideRundir(s.to_string(), rundir.display().to_string());
    let full = rundir.join(path);
    // Lexically: `..` could climb out of the directory whatever the file system holds.
    if full.components().any(|c| c == Component::ParentDir) {
        return Err(outside());
    }
    let full: PathBuf = full.components().collect();
    let dir: PathBuf = rundir.components().collect();
    if full == dir || !full.starts_with(&dir) {
        return Err(outside());
    }
    Ok(full)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(s: &str) -> Result<Target, TargetError> {
        Target::parse(s, Path::new("/var/run/openvswitch"))
    }

    #[test]
    fn inet_targets_take_ovs_defaults() {
        assert_eq!(
            parse("tcp:127.0.0.1"),
            Ok(Target::Tcp("127.0.0.1:6653".parse().unwrap()))
        );
        assert_eq!(
            parse("tcp:10.0.0.1:6633"),
            Ok(Target::Tcp("10.0.0.1:6633".parse().unwrap()))
        );
        assert_eq!(
            parse("tcp:[::1]:16653"),
            Ok(Target::Tcp("[::1]:16653".parse().unwrap()))
        );
        assert_eq!(
            parse("tcp:[fe80::1]"),
            Ok(Target::Tcp("[fe80::1]:6653".parse().unwrap()))
        );
        assert_eq!(
            parse("ptcp:"),
            Ok(Target::PTcp("0.0.0.0:6653".parse().unwrap()))
        );
        assert_eq!(
            parse("ptcp:6634"),
            Ok(Target::PTcp("0.0.0.0:6634".parse().unwrap()))
        );
        assert_eq!(
            parse("ptcp:0:127.0.0.1"),
            Ok(Target::PTcp("127.0.0.1:0".parse().unwrap()))
        );
        assert_eq!(
            parse("ptcp::[::1]"),
            Ok(Target::PTcp("[::1]:6653".parse().unwrap()))
        );
        assert_eq!(
            parse("ptcp:6653:[::1]").unwrap().to_string(),
            "ptcp:6653:[::1]"
        );
        assert_eq!(
            parse("tcp:1.2.3.4").unwrap().to_string(),
            "tcp:1.2.3.4:6653"
        );
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let e = |s| parse(s).unwrap_err().to_string();
        assert_eq!(
            e("tcp:1.2.3.4:99999"),
            "tcp:1.2.3.4:99999: bad port number \"99999\""
        );
        assert_eq!(e("tcp:1.2.3.4:0"), "tcp:1.2.3.4:0: bad port number \"0\"");
        assert_eq!(
            e("tcp:controller"),
            "tcp:controller: bad IP address \"controller\""
        );
        assert_eq!(e("tcp:[::1"), "tcp:[::1: bad IP address \"[::1\"");
        assert_eq!(e("ptcp:x"), "ptcp:x: bad port number \"x\"");
        assert_eq!(
            e("ssl:1.2.3.4:6653"),
            "ssl:1.2.3.4:6653: SSL connections are not supported"
        );
        assert!(e("udp:1.2.3.4").contains("unknown connection type"));
        assert!(e("br0").contains("unknown connection type"));
        assert_eq!(e("punix:"), "punix:: missing socket path");
    }

    #[test]
    fn unix_paths_stay_in_the_rundir() {
        assert_eq!(
            parse("punix:br0.mgmt"),
            Ok(Target::PUnix("/var/run/openvswitch/br0.mgmt".into()))
        );
        assert_eq!(
            parse("unix:/var/run/openvswitch//br-int.mgmt"),
            Ok(Target::Unix("/var/run/openvswitch/br-int.mgmt".into()))
        );
        for bad in [
            "unix:/tmp/x.sock",
            "punix:/etc/passwd",
            "punix:../x",
            "unix:/var/run/openvswitch/../x",
            "punix:/var/run/openvswitch",
            "unix:/var/run/openvswitchX/a",
        ] {
            assert_eq!(
                parse(bad),
                Err(TargetError::OutsideRundir(
                    bad.to_string(),
                    "/var/run/openvswitch".to_string()
                )),
                "{bad}"
            );
        }
    }

    #[test]
    fn every_bridge_has_a_mgmt_and_a_snoop_listener() {
        let [mgmt, snoop] = bridge_targets(Path::new("/run/ovs"), "br0");
        assert_eq!(mgmt.to_string(), "punix:/run/ovs/br0.mgmt");
        assert_eq!(snoop.to_string(), "punix:/run/ovs/br0.snoop");
        assert!(mgmt.is_passive());
        assert_eq!(
            Target::parse("punix:/run/ovs/br0.mgmt", Path::new("/run/ovs")),
            Ok(mgmt)
        );
    }

    proptest! {
        #[test]
        fn parsing_never_panics(s in "\\PC{0,40}") {
            let _ = parse(&s);
        }

        #[test]
        fn inet_targets_print_what_parses_back(
            ip in any::<std::net::IpAddr>(), port in 1u16.., passive: bool
        ) {
            let t = if passive {
                Target::PTcp(SocketAddr::new(ip, port))
            } else {
                Target::Tcp(SocketAddr::new(ip, port))
            };
            prop_assert_eq!(parse(&t.to_string()), Ok(t));
        }
    }
}
