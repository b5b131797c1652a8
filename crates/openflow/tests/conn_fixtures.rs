//! The connection layer answers the first bytes of a peer as Open vSwitch 3.1's ovs-vswitchd
//! does: the fixtures in `testdata/openflow/conn-ovs.txt` (made by
//! `scripts/gen-ofconn-fixtures` against a real ovs-vswitchd) give, for hellos of every shape,
//! garbage, bad lengths, messages of the wrong version and echoes, what it sent back and
//! whether it closed the connection.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use common::Running;
use openflow::conn::{ConnInfo, ConnOptions, Handler, Target};
use openflow::error::{self, OfpErr};
use openflow::header::{self, OFPT_HELLO, Version};
use openflow::hello::VersionSet;

/// What OVS's message layer answers a message it has no handler for (a second hello among
/// them): `OFPBRC_BAD_TYPE`, with the message.
struct BadType;

impl Handler for BadType {
    fn handle(&mut self, conn: &ConnInfo, msg: &[u8], replies: &mut Vec<u8>) {
        let h = header::Header::parse(msg).unwrap();
        assert_eq!(h.version, conn.version.wire());
        error::encode(OfpErr::OfpbrcBadType, h.version, h.xid, msg, replies);
    }
}

fn unhex(s: &str) -> Vec<u8> {
    if s == "-" {
        return Vec::new();
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The answer with the transaction id of a leading hello zeroed: each switch numbers its own.
fn normalized(mut answer: Vec<u8>) -> Vec<u8> {
    if answer.len() >= header::HEADER_LEN && answer[1] == OFPT_HELLO {
        answer[4..8].fill(0);
    }
    answer
}

/// Sends `sent`, and reads until the switch closes or is quiet for longer than it gives a
/// connection to finish its hellos (1 s).
fn exchange(path: &Path, sent: &[u8]) -> (Vec<u8>, &'static str) {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    s.write_all(sent).unwrap();
    let mut got = Vec::new();
    let mut buf = [0; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (got, "closed"),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return (got, "open");
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return (got, "closed"),
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn first_bytes_are_answered_as_ovs_vswitchd_answers_them() {
    let fixtures = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/openflow/conn-ovs.txt"),
    )
    .unwrap();
    // "ball" allows every version; "br13" OpenFlow 1.3 alone.
    let mut br13 = None;
    let r = Running::start(
        ConnOptions::service(VersionSet::ALL),
        |lp| {
            let (_, Target::PUnix(mgmt)) = &lp.listeners()[0] else {
                unreachable!("Running::start listens on br0.mgmt")
            };
            let path = mgmt.with_file_name("br13.mgmt");
            let of13 = VersionSet::of(&[Version::Of13]);
            lp.listen(&Target::PUnix(path.clone()), ConnOptions::service(of13))
                .unwrap();
            br13 = Some(path);
        },
        BadType,
    );
    let br13 = br13.unwrap();
    // All at once: a case that stays open takes the whole quiet time.
    let cases: Vec<_> = fixtures
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [name, bridge, sent, answer, state] = f[..] else {
                panic!("bad fixture line: {line}")
            };
            let path = match bridge {
                "br13" => br13.clone(),
                "ball" => r.mgmt.clone(),
                _ => panic!("unknown bridge {bridge}"),
            };
            let sent = unhex(sent);
            let run = std::thread::spawn(move || exchange(&path, &sent));
            (name, normalized(unhex(answer)), state, run)
        })
        .collect();
    assert!(cases.len() >= 16, "{} fixtures", cases.len());
    for (name, answer, state, run) in cases {
        let (got, got_state) = run.join().unwrap();
        assert_eq!((normalized(got), got_state), (answer, state), "{name}");
    }
}
