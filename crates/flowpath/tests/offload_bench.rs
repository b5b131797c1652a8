//! TCP between two hosts over VXLAN and over GENEVE through two flowpath instances (the
//! topology of `scripts/offload-bench`: hosts behind tap ports that take TCP super-frames,
//! super-frames pushed whole into the tunnel and segmented after the push, the hypervisors
//! joined by a veth underlay opened with AF_PACKET): a short run of this build must deliver, and nothing on the way (the hosts' and
//! hypervisors' devices, the switches' ports) may drop a packet. Before the AF_PACKET rx rings
//! were made deep enough for the segments of a burst of super-frames, the receiving switch's
//! underlay port dropped thousands of them in a few seconds, one TCP retransmission each.
//! UDP from a `UDP_SEGMENT` sender (`-G`: USO super-frames, which the hosts' taps hand the
//! switch whole and the switch cuts into datagrams before the push) must arrive too.
//! Between two switches whose underlay ports are taps (`flowpath-tapul`), the receiving
//! switch takes each encapsulated super-frame whole, TCP and USO, pops it once and hands the
//! inner one whole to the host's tap. No timing is checked. Skipped, with the reason, without root, iperf3 or Open vSwitch's
//! database tools (the switches run under `--ovsdb`).
//!
//! The same between two QEMU guests on vhost-user ports (`flowpath-vm`): their Linux sends
//! and takes TCP super-frames (HOST_TSO, GUEST_TSO), which cross the tunnel; every byte must
//! arrive. A TCG guest is slow to give its receive ring buffers back, so drops there (and
//! the retransmissions they cause) are the guest's, not checked.

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

/// One topology at a time: each runs two switches, two databases and iperf3.
static ONE: Mutex<()> = Mutex::new(());

/// Where `tool` is in `PATH`.
fn which(tool: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(tool))
        .find(|f| f.is_file())
}

/// The script's line for `mode` (a table row of 1-second runs: what is checked is delivery,
/// not rates; or `gso-bytes`'s verdict), split in words, and the counters it kept after the
/// TCP run; `None` (having printed SKIP) when it cannot run here.
fn bench(mode: &str) -> Option<(Vec<String>, String)> {
    bench_rows(mode, &[mode], &[]).map(|mut rows| rows.remove(0))
}

/// [`bench`] of `mode` with the script's options `extra` too: the lines for `names`, each
/// with the counters kept for it (or those after the TCP run), for a failure's message.
fn bench_rows(mode: &str, names: &[&str], extra: &[&str]) -> Option<Vec<(Vec<String>, String)>> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIP offload_bench: needs root (network namespaces)");
        return None;
    }
    for t in [
        "iperf3",
        "ethtool",
        "ping",
        "python3",
        "ovsdb-server",
        "ovsdb-tool",
        "ovs-vsctl",
        "ovs-appctl",
    ] {
        if which(t).is_none() {
            eprintln!("SKIP offload_bench: {t} is missing");
            return None;
        }
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/offload-bench");
    let keep = std::env::temp_dir().join(format!("offload-bench-{}", std::process::id()));
    let out = Command::new(script)
        .args([
            "-T",
            "-t",
            "1",
            "-m",
            mode,
            "-b",
            env!("CARGO_BIN_EXE_flowpath"),
            "-k",
        ])
        .arg(&keep)
        .args(extra)
        .env("OFFLOAD_BENCH_NS", format!("obt{}", std::process::id()))
        // The script removes what it made, namespaces included, however it ends.
        .output()
        .expect("scripts/offload-bench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    let after_tcp = std::fs::read_to_string(keep.join(format!("{mode}-after-tcp.txt")));
    let rows = names
        .iter()
        .map(|&name| {
            let row = stdout
                .lines()
                .find(|l| l.split([' ', ':']).next() == Some(name))
                .unwrap_or_else(|| panic!("no row for {name}: {stdout}{stderr}"));
            let row = row.split_whitespace().map(str::to_owned).collect();
            let diag = match std::fs::read_to_string(keep.join(format!("{name}.txt"))) {
                Ok(d) if name != mode => d,
                _ => after_tcp.as_ref().cloned().unwrap_or_default(),
            };
            (row, diag)
        })
        .collect();
    let _ = std::fs::remove_dir_all(&keep);
    Some(rows)
}

/// TCP over `mode`'s tunnel, then (in the same topology, `-G`) UDP from a sender with
/// `UDP_SEGMENT` (super-frames of 44 datagrams, which the host's tap hands the switch whole
/// where the kernel takes USO): TCP without a drop on the way, and datagrams arrive (the UDP
/// sender is unpaced, so the tap's queue drops some: not checked).
fn delivers_without_drops(mode: &str) {
    let uso = format!("{mode}-uso");
    let Some(rows) = bench_rows(mode, &[mode, &uso], &["-G"]) else {
        return;
    };
    let (row, diag) = &rows[0];
    // path, TCP Gbit/s, retransmissions, drops, then UDP's columns ("-": not run)
    assert_eq!(row.len(), 7, "{row:?}");
    let gbps: f64 = row[1].parse().unwrap_or_else(|_| panic!("{row:?}"));
    assert!(gbps > 0.0, "TCP delivered nothing: {row:?}");
    assert_eq!(row[3], "0", "packets dropped on the way: {row:?}\n{diag}");
    // path, -, -, drops, UDP Gbit/s, loss, -
    let (row, diag) = &rows[1];
    assert_eq!(row.len(), 7, "{row:?}");
    let gbps: f64 = row[4].parse().unwrap_or_else(|_| panic!("{row:?}\n{diag}"));
    assert!(gbps > 0.0, "no datagram arrived: {row:?}\n{diag}");
}

/// Three TCP super-frames from a host's packet socket (TSO as a guest asks for it), cut by
/// flowpath and pushed into VXLAN, arrive as the same bytes as the kernel's own software GSO
/// makes of them behind a kernel VXLAN device (the tunnels' own outer choices aside).
#[test]
fn super_frames_segmented_for_vxlan_are_the_kernels_segments() {
    let Some((row, _)) = bench("gso-bytes") else {
        return;
    };
    assert_eq!(
        row.join(" "),
        "gso-bytes: 13 segments, byte for byte as the kernel's (outer tunnel choices aside)"
    );
}

/// The same over GENEVE, where the kernel has no device to compare with: OVS 3.1's userspace
/// datapath is the peer (its tap takes no TSO, so the kernel cuts the super-frames and OVS
/// pushes each segment), flowpath pushes each super-frame whole and segments it after the push.
#[test]
fn super_frames_segmented_for_geneve_are_ovs_s_segments() {
    if !Path::new("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk").is_file() {
        eprintln!("SKIP offload_bench: no ovs-vswitchd-dpdk");
        return;
    }
    let Some((row, _)) = bench("gso-bytes-geneve") else {
        return;
    };
    assert_eq!(
        row.join(" "),
        "gso-bytes-geneve: 13 segments, byte for byte as OVS 3.1's (outer tunnel choices aside)"
    );
}

#[test]
fn tcp_and_udp_over_vxlan_through_two_switches_arrive() {
    delivers_without_drops("flowpath");
}

#[test]
fn tcp_and_udp_over_geneve_through_two_switches_arrive() {
    delivers_without_drops("flowpath-geneve");
}

/// The lines of `diag` (the script's diagnostics) after `== {header}`, up to the next `==`.
fn section<'a>(diag: &'a str, header: &str) -> &'a str {
    let at = format!("== {header}\n");
    let Some(start) = diag.find(&at).map(|i| i + at.len()) else {
        return "";
    };
    let rest = &diag[start..];
    &rest[..rest.find("\n==").map_or(rest.len(), |i| i + 1)]
}

/// The value of counter `name` (`name:N`, a word of its own) in `text`, if it is there.
fn counter(text: &str, name: &str) -> Option<u64> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.strip_prefix(':')?.parse().ok())
}

/// TCP, then UDP from a `UDP_SEGMENT` sender (`-G`), over `mode`'s tunnel between two
/// flowpath hypervisors whose underlay ports are taps (`flowpath-tapul`): TCP delivered with
/// no drop on the way, datagrams delivered, and the receiving switch took the encapsulated
/// super-frames of both kinds whole from its underlay tap (its `rx_tnl_gso_whole` and
/// `rx_tnl_uso_whole`, none cut on receive), popped them with no `tnl_pop` drop and wrote the
/// inner ones whole to the host's tap (`tcp` and `udp super-frames tx whole`). Skipped, with
/// the reason, where the kernel's tap takes no UDP-tunnel GSO (before Linux 6.17).
fn tap_underlays_pop_super_frames_whole(mode: &str, extra: &[&str]) {
    let uso = format!("{mode}-uso");
    let Some(rows) = bench_rows(mode, &[mode, &uso], &[&["-G"], extra].concat()) else {
        return;
    };
    let (row, diag) = &rows[0];
    assert_eq!(row.len(), 7, "{row:?}");
    let gbps: f64 = row[1].parse().unwrap_or_else(|_| panic!("{row:?}"));
    assert!(gbps > 0.0, "TCP delivered nothing: {row:?}");
    assert_eq!(row[3], "0", "packets dropped on the way: {row:?}\n{diag}");
    if !popped_whole(diag, "rx_tnl_gso_whole", "tcp super-frames") {
        eprintln!("SKIP {mode}: the kernel's tap takes no UDP-tunnel GSO (Linux 6.17 and later)");
        return;
    }
    // The sender is unpaced: its tap's queue and the receiving socket drop datagrams (not
    // checked), but none is lost inside the switches and some arrive.
    let (row, diag) = &rows[1];
    assert_eq!(row.len(), 7, "{row:?}");
    let gbps: f64 = row[4].parse().unwrap_or_else(|_| panic!("{row:?}\n{diag}"));
    assert!(gbps > 0.0, "no datagram arrived: {row:?}\n{diag}");
    assert!(popped_whole(diag, "rx_tnl_uso_whole", "udp super-frames"));
}

/// Whether the receiving switch's counters in `diag` show encapsulated super-frames of a kind
/// taken whole from its underlay tap (`rx_whole`, none cut), popped with no `tnl_pop` drop
/// and written whole to the host's tap (the `port/stats` line starting with `tx_line`);
/// false when the tap has no such counter (no UDP-tunnel GSO), a failed assertion otherwise.
fn popped_whole(diag: &str, rx_whole: &str, tx_line: &str) -> bool {
    let underlay = section(diag, "hv2 port/stats ut2");
    let Some(whole) = counter(underlay, rx_whole) else {
        return false;
    };
    assert!(whole > 0, "no super-frame came in whole: {underlay}");
    assert_eq!(counter(underlay, "rx_tnl_gso_cut"), Some(0), "{underlay}");
    assert!(!underlay.contains("rx_drop_"), "{underlay}");
    let drops = section(diag, "hv2 dpif-netdev/pmd-drop-show");
    let popped_bad: Vec<&str> = drops
        .lines()
        .filter(|l| l.trim_start().starts_with("tunnel_pop_"))
        .filter(|l| l.split_whitespace().last() != Some("0"))
        .collect();
    assert!(popped_bad.is_empty(), "{drops}");
    let host = section(diag, "hv2 port/stats t2");
    let tx_whole = host
        .lines()
        .find(|l| l.trim_start().starts_with(tx_line))
        .and_then(|l| counter(l, "whole"))
        .unwrap_or(0);
    assert!(tx_whole > 0, "no {tx_line} went whole to the host: {host}");
    true
}

/// Over VXLAN, with the hosts' iperf3 kept off the PMDs' core (`-p`).
#[test]
fn tcp_and_udp_over_vxlan_between_tap_underlays_are_popped_whole() {
    tap_underlays_pop_super_frames_whole("flowpath-tapul", &["-p"]);
}

/// The same over GENEVE, with each hypervisor's PMD on a core of its own and each host's
/// iperf3 pinned beside it (`-s -p`).
#[test]
fn tcp_and_udp_over_geneve_between_tap_underlays_are_popped_whole() {
    tap_underlays_pop_super_frames_whole("flowpath-tapul-geneve", &["-s", "-p"]);
}

/// Whether QEMU and a guest image can be had here (else a SKIP line).
fn guest_can_run(test: &str) -> bool {
    if which("qemu-system-x86_64").is_none() {
        eprintln!("SKIP {test}: no qemu-system-x86_64 (Debian package qemu-system-x86)");
        return false;
    }
    let dir = std::env::temp_dir().join(format!("{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("job"), "true\n").unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/guest-image");
    let o = Command::new(script)
        .arg("-i")
        .arg(&dir)
        .arg(dir.join("job"))
        .output()
        .expect("scripts/guest-image");
    let _ = std::fs::remove_dir_all(&dir);
    if !o.status.success() {
        let why = String::from_utf8_lossy(&o.stderr);
        eprintln!("SKIP {test}: {}", why.trim());
    }
    o.status.success()
}

/// TCP between two QEMU guests through the tunnel `mode` runs over: delivered.
fn guests_deliver(test: &str, mode: &str) {
    if !guest_can_run(test) {
        return;
    }
    let Some((row, diag)) = bench(mode) else {
        return;
    };
    assert_eq!(row.len(), 7, "{row:?}");
    let gbps: f64 = row[1].parse().unwrap_or_else(|_| panic!("{row:?}\n{diag}"));
    assert!(gbps > 0.0, "TCP delivered nothing: {row:?}");
}

#[test]
fn tcp_between_qemu_guests_over_vxlan_arrives() {
    guests_deliver("tcp_between_qemu_guests_over_vxlan_arrives", "flowpath-vm");
}

#[test]
fn tcp_between_qemu_guests_over_geneve_arrives() {
    guests_deliver(
        "tcp_between_qemu_guests_over_geneve_arrives",
        "flowpath-vm-geneve",
    );
}

/// Where a tool the script needs is missing, it says which before it builds anything: a
/// machine without `ping` read "no ping" in every row, as if each path were broken, and the
/// script ended successfully.
#[test]
fn a_missing_tool_is_named_before_any_topology() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIP offload_bench: needs root (the script checks it first)");
        return;
    }
    // Everything the script runs before its check of the tools, and every tool but ping.
    let bin = std::env::temp_dir().join(format!("offload-bench-noping-{}", std::process::id()));
    std::fs::create_dir_all(&bin).unwrap();
    for t in ["bash", "id", "ip", "iperf3", "ethtool", "ss", "python3"] {
        let Some(at) = which(t) else {
            eprintln!("SKIP offload_bench: {t} is missing");
            let _ = std::fs::remove_dir_all(&bin);
            return;
        };
        std::os::unix::fs::symlink(at, bin.join(t)).unwrap();
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/offload-bench");
    let out = Command::new(script)
        .args(["-T", "-t", "1", "-m", "kernel"])
        .env("PATH", &bin)
        .output()
        .expect("scripts/offload-bench");
    let _ = std::fs::remove_dir_all(&bin);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("'ping' is missing"), "{stdout}{stderr}");
    assert!(stdout.is_empty(), "{stdout}{stderr}");
}
