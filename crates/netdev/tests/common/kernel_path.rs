//! Frames through the Linux kernel as an oracle: sent from one namespace's interface through
//! a packet socket (with a virtio-net header when the frames carry one, so that the kernel
//! does the offload it asks for) and captured on the far end of a veth, for the byte-level
//! comparisons of the `uso_oracle`, `ufo_oracle` and `gro_oracle` tests.

use std::process::{Command, Stdio};

use super::ns_sh;

/// Injects (`send IFNAME VNET HEX...`: each frame hex, behind a 10-byte virtio-net header
/// when VNET is 1) or captures (`capture IFNAME SECONDS PROTO KEEP`: what the interface
/// received on ethertype PROTO (3: all), one hex frame a line, those for which the Python
/// expression KEEP over the frame `f` holds).
const PACKETS: &str = r#"
import binascii, socket, sys, time
mode, ifname = sys.argv[1], sys.argv[2]
if mode == "send":
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    if sys.argv[3] == "1":
        s.setsockopt(263, 15, 1)  # SOL_PACKET, PACKET_VNET_HDR
    s.bind((ifname, 0))
    for h in sys.argv[4:]:
        s.send(binascii.unhexlify(h))
else:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(int(sys.argv[4], 0)))
    s.bind((ifname, 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
    keep = eval("lambda f: " + sys.argv[5])
    print("ready", flush=True)
    end = time.time() + float(sys.argv[3])
    while time.time() < end:
        s.settimeout(max(end - time.time(), 0.01))
        try:
            f, addr = s.recvfrom(1 << 17)
        except socket.timeout:
            break
        if addr[2] != socket.PACKET_OUTGOING and keep(f):
            print(binascii.hexlify(f).decode(), flush=True)
"#;

/// What the far end captures.
pub struct Capture<'a> {
    /// The ethertype the capturing socket binds to (`"3"`: all, `"0x0800"`: IPv4).
    pub proto: &'a str,
    /// A Python expression over the frame `f`: which received frames count.
    pub keep: &'a str,
}

/// Lower-case hex of `b`.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// What Linux makes of `frames` (each behind a virtio-net header when `vnet_hdr`): sent from
/// `ns_a`'s `a`, and what `ns_b`'s `b` received in the second after, as `cap` selects.
pub fn through(
    (ns_a, a): (&str, &str),
    (ns_b, b): (&str, &str),
    vnet_hdr: bool,
    cap: &Capture,
    frames: &[Vec<u8>],
) -> Vec<Vec<u8>> {
    let mut capture = Command::new("ip")
        .args([
            "netns", "exec", ns_b, "python3", "-c", PACKETS, "capture", b, "1", cap.proto, cap.keep,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(capture.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let hexes: Vec<String> = frames.iter().map(|f| hex(f)).collect();
    let vnet = if vnet_hdr { "1" } else { "0" };
    let mut send = vec!["python3", "-c", PACKETS, "send", a, vnet];
    send.extend(hexes.iter().map(String::as_str));
    ns_sh(ns_a, &send);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    capture.wait().unwrap();
    rest.lines()
        .map(|l| {
            (0..l.len() / 2)
                .map(|i| u8::from_str_radix(&l[2 * i..2 * i + 2], 16).unwrap())
                .collect()
        })
        .collect()
}
