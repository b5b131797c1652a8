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
//! Skipped, with the reason, without root, Open vSwitch, OVN or tcpdump.

use std::path::Path;
use std::process::Command;

/// `scripts/ovn-cloud test [--faults]` with these chassis; its checks (the faults' lines
/// apart), or the reason it could not run.
fn cloud(hv1: &str, hv2: &str, faults: bool) -> Result<String, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ovn-cloud");
    let dir = std::env::temp_dir().join(format!("ovn-cloud-{}", std::process::id()));
    let out = Command::new(script)
        .arg("test")
        .args(faults.then_some("--faults"))
        .args(["--hv1", hv1, "--hv2", hv2, "--flowpath"])
        .arg(env!("CARGO_BIN_EXE_flowpath"))
        .env("OVN_CLOUD_DIR", &dir)
        .output()
        .map_err(|e| format!("scripts/ovn-cloud: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(77) {
        return Err(stderr.trim().to_owned());
    }
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "hv1 {hv1}, hv2 {hv2}: {stdout}{stderr}"
    );
    Ok(stdout
        .lines()
        .filter(|l| !l.starts_with("fault "))
        .map(|l| format!("{l}\n"))
        .collect())
}

#[test]
fn two_chassis_over_geneve_work_as_they_do_with_ovs_vswitchd() {
    let ovs = match cloud("ovs", "ovs", false) {
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
        let fp = cloud(hv1, hv2, faults).unwrap();
        assert_eq!(ovs, fp, "hv1 {hv1}, hv2 {hv2} print unlike OVS on both");
    }
}
