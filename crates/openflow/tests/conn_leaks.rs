//! Many short connections leave no file descriptor or memory behind. Alone in its test
//! binary, so that no other test opens descriptors meanwhile.

mod common;

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use common::{Running, client, echo, eventually};
use openflow::conn::ConnOptions;
use openflow::header::OFPT_ECHO_REPLY;
use openflow::hello::VersionSet;

/// Open file descriptors of this process.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Resident memory of this process, in KiB.
fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = s.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4
}

#[test]
fn a_thousand_connections_leave_nothing_behind() {
    let r = Running::start(ConnOptions::service(VersionSet::ALL), |_| {}, ());
    // Warm up, so that lazily allocated buffers count as the baseline.
    for _ in 0..50 {
        let mut s = client(&r.mgmt);
        echo(&mut s, 1);
    }
    assert!(eventually(Duration::from_secs(5), || r
        .handle
        .status()
        .unwrap()
        .is_empty()));
    let (fds, rss) = (open_fds(), rss_kib());
    for i in 0..1000 {
        match i % 3 {
            // Hello, echo, close.
            0 => {
                let mut s = client(&r.mgmt);
                assert_eq!(echo(&mut s, i)[1], OFPT_ECHO_REPLY);
            }
            // Connect and hang up at once.
            1 => drop(UnixStream::connect(&r.mgmt).unwrap()),
            // Half a message.
            _ => {
                let mut s = client(&r.mgmt);
                s.write_all(&[4, 20, 0, 16]).unwrap();
            }
        }
    }
    assert!(eventually(Duration::from_secs(10), || r
        .handle
        .status()
        .unwrap()
        .is_empty()));
    let grown = rss_kib().saturating_sub(rss);
    assert_eq!(open_fds(), fds, "descriptors open before and after");
    assert!(grown < 4 * 1024, "resident memory grew by {grown} KiB");
    let lp = r.stop();
    assert!(lp.status().is_empty());
}
