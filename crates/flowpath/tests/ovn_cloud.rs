//! OVN across two chassis: Debian's OVN 23.03 with its northbound and southbound databases as
//! 3-server RAFT clusters drives two chassis joined by GENEVE over an underlay veth, each in
//! its own network namespace. `scripts/ovn-cloud test` stands the cloud up, checks it
//! (cross-chassis ping both ways, port-group ACLs, the router port, native DHCP, a distributed
//! gateway port on hv2 with SNAT and dnat_and_snat reached from hv1, a load balancer over
//! backends on both chassis, and one GENEVE frame byte for byte) and tears it down. This runs
//! it with ovs-vswitchd on both chassis, with this build's flowpath on both, and mixed, and
//! requires every check to pass and each cloud to print exactly what the all-OVS cloud prints;
//! the all-flowpath cloud also goes through `scripts/ovn-cloud faults` (each piece killed and
//! restarted under traffic).
//!
//! With a third chassis (`--hv3`), lr1's gateway port is an HA gateway on hv2 and hv3 over a
//! provider network, so ovn-controller runs BFD on the tunnels: every BFD session must come
//! up, the gateway must move to hv3 when hv2's vswitch is killed and back when it returns,
//! with flowpath on all three chassis printing what ovs-vswitchd on all three prints (the
//! failover time aside).
//! Skipped, with the reason, without root, Open vSwitch, OVN or tcpdump.

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

/// One cloud at a time: each runs a dozen daemons and busy-polling PMD threads.
static ONE_CLOUD: Mutex<()> = Mutex::new(());

/// `scripts/ovn-cloud test [--faults]` with these chassis; its checks (the faults' lines and
/// the failover time apart), or the reason it could not run.
fn cloud(hv1: &str, hv2: &str, hv3: Option<&str>, faults: bool) -> Result<String, String> {
    let _one = ONE_CLOUD.lock().unwrap_or_else(|e| e.into_inner());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ovn-cloud");
    let id = std::process::id();
    let dir = std::env::temp_dir().join(format!("ovn-cloud-{id}"));
    let out = Command::new(script)
        .arg("test")
        .args(faults.then_some("--faults"))
        .args(["--hv1", hv1, "--hv2", hv2])
        .args(hv3.map(|h| ["--hv3", h]).into_iter().flatten())
        .arg("--flowpath")
        .arg(env!("CARGO_BIN_EXE_flowpath"))
        .env("OVN_CLOUD_DIR", &dir)
        // Namespaces of its own: a lab a user has up keeps its own.
        .env("OVN_CLOUD_NS", format!("oc{id}"))
        .output()
        .map_err(|e| format!("scripts/ovn-cloud: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(77) {
        return Err(stderr.trim().to_owned());
    }
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "hv1 {hv1}, hv2 {hv2}, hv3 {hv3:?}: {stdout}{stderr}"
    );
    Ok(stdout
        .lines()
        .filter(|l| !l.starts_with("fault ") && !l.starts_with("failover time: "))
        .map(|l| format!("{l}\n"))
        .collect())
}

#[test]
fn two_chassis_over_geneve_work_as_they_do_with_ovs_vswitchd() {
    let ovs = match cloud("ovs", "ovs", None, false) {
        Ok(o) => o,
        Err(why) => {
            eprintln!("SKIP ovn_cloud: {why}");
            return;
        }
    };
    assert!(ovs.contains("geneve frame: 0000"), "{ovs}");
    // All-flowpath, then also through the faults: each piece off the packet path (a
    // northbound and a southbound cluster member, ovn-northd, an ovn-controller) killed and
    // started again without stopping forwarding, and a vswitch restart; the tables come back.
    for (hv1, hv2, faults) in [
        ("flowpath", "flowpath", true),
        ("ovs", "flowpath", false),
        ("flowpath", "ovs", false),
    ] {
        let fp = cloud(hv1, hv2, None, faults).unwrap();
        assert_eq!(ovs, fp, "hv1 {hv1}, hv2 {hv2} print unlike OVS on both");
    }
}

#[test]
fn an_ha_gateway_fails_over_on_bfd_as_with_ovs_vswitchd() {
    let ovs = match cloud("ovs", "ovs", Some("ovs"), false) {
        Ok(o) => o,
        Err(why) => {
            eprintln!("SKIP ovn_cloud: {why}");
            return;
        }
    };
    assert!(ovs.contains("failover: gateway hv3\n"), "{ovs}");
    let fp = cloud("flowpath", "flowpath", Some("flowpath"), false).unwrap();
    assert_eq!(
        ovs, fp,
        "three flowpath chassis print unlike three OVS chassis"
    );
}
