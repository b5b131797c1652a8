//! What the connection layer costs, measured rather than asserted (ignored by default; run
//! with `cargo test --release -p openflow --test conn_throughput -- --ignored --nocapture`):
//! echo round trips one at a time and pipelined, packet-ins queued from another thread to a
//! peer that reads them, and short connections.

mod common;

use std::io::Write;
use std::thread;
use std::time::{Duration, Instant};

use common::{Running, client, echo, msg, read_msg};
use openflow::conn::{ConnOptions, Dest, MsgKind};
use openflow::header::OFPT_ECHO_REQUEST;
use openflow::hello::VersionSet;

#[test]
#[ignore = "a measurement, not a check"]
fn echo_packet_in_and_connection_rates() {
    let r = Running::start(ConnOptions::service(VersionSet::ALL), |_| {}, ());
    let mut s = client(&r.mgmt);

    let n = 20_000;
    let t = Instant::now();
    for i in 0..n {
        echo(&mut s, i);
    }
    let per = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    eprintln!("echo, one at a time: {per:.1} us per round trip");

    let n = 200_000u32;
    let mut w = s.try_clone().unwrap();
    let t = Instant::now();
    let writer = thread::spawn(move || {
        let mut buf = Vec::new();
        for i in 0..n {
            buf.extend_from_slice(&msg(4, OFPT_ECHO_REQUEST, i, &[]));
            if buf.len() > 64 * 1024 {
                w.write_all(&buf).unwrap();
                buf.clear();
            }
        }
        w.write_all(&buf).unwrap();
    });
    for _ in 0..n {
        read_msg(&mut s).unwrap();
    }
    writer.join().unwrap();
    let rate = f64::from(n) / t.elapsed().as_secs_f64() / 1e3;
    eprintln!("echo, pipelined: {rate:.0} k messages/s");

    // The reader stops after half a second of silence.
    let quiet = Duration::from_millis(500);
    let mut rs = s.try_clone().unwrap();
    rs.set_read_timeout(Some(quiet)).unwrap();
    let t = Instant::now();
    let reader = thread::spawn(move || {
        let mut got = 0u64;
        while read_msg(&mut rs).is_some() {
            got += 1;
        }
        got
    });
    let pin = msg(4, 10, 0, &[0; 100]);
    for _ in 0..n {
        r.handle.send(Dest::All, pin.clone(), MsgKind::Async);
    }
    let got = reader.join().unwrap();
    let secs = (t.elapsed() - quiet).as_secs_f64();
    let dropped = r.handle.status().unwrap()[0].counters.async_dropped;
    eprintln!(
        "packet-ins from another thread: {n} sent, {got} delivered ({:.0} k/s), {dropped} dropped",
        got as f64 / secs / 1e3
    );

    let n = 2000;
    let t = Instant::now();
    for _ in 0..n {
        drop(client(&r.mgmt));
    }
    let per = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    eprintln!("connect, hellos, close: {per:.0} us each");
}
