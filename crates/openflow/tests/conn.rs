//! The connection layer over real sockets: stock `ovs-ofctl` against a listener, a fake
//! controller for active connections, silent, hostile and slow peers, and many short
//! connections.

mod common;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::{Running, client, echo, eventually, hello_of, msg, ovs_ofctl, read_msg};
use openflow::conn::{
    ConnError, ConnEvent, ConnInfo, ConnOptions, ConnState, Dest, Handler, MsgKind, Role, Target,
    bridge_targets,
};
use openflow::header::{OFPT_ECHO_REPLY, OFPT_ECHO_REQUEST, OFPT_ERROR, OFPT_HELLO, Version};
use openflow::hello::VersionSet;

#[test]
fn ovs_ofctl_probe_succeeds_against_the_layer_alone() {
    let Some(ofctl) = ovs_ofctl() else { return };
    let r = Running::start(ConnOptions::service(VersionSet::ALL), |_| {}, ());
    let (_, ptcp) = r
        .handle
        .listen(
            &Target::PTcp("127.0.0.1:0".parse().unwrap()),
            ConnOptions::service(VersionSet::ALL),
        )
        .unwrap();
    let Target::PTcp(addr) = ptcp else {
        unreachable!()
    };
    let unix = format!("unix:{}", r.mgmt.display());
    let tcp = format!("tcp:{addr}");
    let runs = [
        (&[][..], &unix),
        (&["-O", "OpenFlow15"], &unix),
        (&["-O", "OpenFlow13"], &unix),
        (&["-O", "OpenFlow14"], &tcp),
    ];
    for (args, target) in runs {
        let out = Command::new(ofctl)
            .args(args)
            .args(["probe", target])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ovs-ofctl {args:?} probe {target}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Each probe came and went.
    let mut versions = Vec::new();
    while let Ok(e) = r.events.recv_timeout(Duration::from_secs(5)) {
        if let ConnEvent::Connected { version, role, .. } = e {
            assert_eq!(role, Role::Service);
            versions.push(version);
        }
        if versions.len() == runs.len() {
            break;
        }
    }
    assert_eq!(
        versions,
        [Version::Of10, Version::Of15, Version::Of13, Version::Of14]
    );
    assert!(eventually(Duration::from_secs(5), || r
        .handle
        .status()
        .unwrap()
        .is_empty()));
}

#[test]
fn a_version_mismatch_prints_ovs_s_error_on_ovs_ofctl_s_side() {
    let Some(ofctl) = ovs_ofctl() else { return };
    let of13 = VersionSet::of(&[Version::Of13]);
    let r = Running::start(ConnOptions::service(of13), |_| {}, ());
    let out = Command::new(ofctl)
        .args(["-O", "OpenFlow10", "probe"])
        .arg(format!("unix:{}", r.mgmt.display()))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "version negotiation failed (we support version 0x01, peer supports version 0x04)"
        ),
        "{stderr}"
    );
    // And what the switch sends it, read as OVS reads it.
    let mut s = UnixStream::connect(&r.mgmt).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&hello_of(VersionSet::of(&[Version::Of10])))
        .unwrap();
    let ours = read_msg(&mut s).unwrap();
    assert_eq!(ours, msg(4, OFPT_HELLO, 1, &[0, 1, 0, 8, 0, 0, 0, 0x10]));
    let err = read_msg(&mut s).unwrap();
    assert_eq!((err[0], err[1]), (1, OFPT_ERROR));
    assert_eq!(
        &err[12..],
        b"We support version 0x04, you support version 0x01, no common versions."
    );
    let hex: String = err.iter().map(|b| format!("{b:02x}")).collect();
    let printed = Command::new(ofctl)
        .args(["ofp-print", &hex])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&printed.stdout),
        "OFPT_ERROR (xid=0x0): OFPHFC_INCOMPATIBLE\n\
         We support version 0x04, you support version 0x01, no common versions.\n"
    );
    assert_eq!(read_msg(&mut s), None, "then the connection is closed");
}

/// A fake controller: accepts on `l`, exchanges hellos, answers echoes until told to stop.
fn controller_accept(l: &TcpListener) -> TcpStream {
    let (mut s, _) = l.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&hello_of(VersionSet::of(&[Version::Of15])))
        .unwrap();
    assert_eq!(read_msg(&mut s).unwrap()[1], OFPT_HELLO);
    s
}

#[test]
fn an_active_connection_reconnects_with_backoff_after_the_controller_restarts() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let opts = ConnOptions {
        max_backoff: Duration::from_secs(2),
        ..ConnOptions::controller(VersionSet::ALL)
    };
    let mut id = None;
    let r = Running::start(
        opts,
        |lp| id = Some(lp.connect(Target::Tcp(addr), opts)),
        (),
    );
    let id = id.unwrap();
    let s = controller_accept(&l);
    let up = |r: &Running| match r.events.recv_timeout(Duration::from_secs(10)) {
        Ok(ConnEvent::Connected {
            id: i,
            role,
            version,
            ..
        }) => {
            assert_eq!((i, role, version), (id, Role::Primary, Version::Of15));
            Instant::now()
        }
        other => panic!("{other:?}"),
    };
    up(&r);

    // The controller goes away, and comes back 1.5 s later on the same port. The switch
    // waits 1 s (the connection was up longer than that), is refused, waits 2 s.
    drop((s, l));
    let down = Instant::now();
    assert!(matches!(
        r.events.recv_timeout(Duration::from_secs(10)),
        Ok(ConnEvent::Disconnected { .. })
    ));
    thread::sleep(Duration::from_millis(1500));
    let l = TcpListener::bind(addr).unwrap();
    let s = controller_accept(&l);
    let back = up(&r) - down;
    assert!(
        back >= Duration::from_millis(2800) && back < Duration::from_millis(4500),
        "reconnected after {back:?}"
    );
    let st = r.handle.status().unwrap();
    assert_eq!(st.len(), 1);
    assert_eq!(st[0].state, ConnState::Active);
    assert_eq!(st[0].n_connects, 2);
    assert!(st[0].since_connect.unwrap() < Duration::from_secs(1));
    // The last to end was the refused attempt, after the controller went away.
    assert!(st[0].since_disconnect.unwrap() < down.elapsed() - Duration::from_millis(500));
    assert_eq!(
        st[0].last_error.as_ref().map(|e| e.to_string()),
        Some("connection failed (Connection refused)".to_string())
    );
    assert_eq!(st[0].target.to_string(), format!("tcp:{addr}"));

    // A controller that hangs up at once, every time: the waits grow to the maximum (2 s).
    drop(s);
    let mut accepted = Vec::new();
    for _ in 0..3 {
        drop(controller_accept(&l));
        accepted.push(Instant::now());
    }
    let gaps: Vec<u128> = accepted
        .windows(2)
        .map(|w| (w[1] - w[0]).as_millis())
        .collect();
    assert!(
        gaps.iter().all(|&g| (1800..3000).contains(&g)),
        "gaps between attempts: {gaps:?} ms"
    );
}

#[test]
fn a_controller_that_never_says_hello_times_out_and_is_tried_again() {
    let dir = std::env::temp_dir().join(format!("of-conn-mute-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("controller.sock");
    let _ = std::fs::remove_file(&path);
    let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let mut id = None;
    let r = Running::start(
        ConnOptions::service(VersionSet::ALL),
        |lp| {
            let target = Target::parse(&format!("unix:{}", path.display()), &dir).unwrap();
            id = Some(lp.connect(target, ConnOptions::controller(VersionSet::ALL)));
        },
        (),
    );
    // Connected, our hello sent, none back: the attempt ends after 1 s and, having connected
    // for less than its wait, is tried again after 1 s more.
    let (mut first, _) = l.accept().unwrap();
    let t0 = Instant::now();
    first
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(read_msg(&mut first).unwrap()[1], OFPT_HELLO);
    assert_eq!(read_msg(&mut first), None);
    let dropped = t0.elapsed();
    let st = r.handle.status().unwrap();
    assert_eq!(st[0].id, id.unwrap());
    assert_eq!(st[0].last_error, Some(ConnError::ConnectTimeout));
    let _second = l.accept().unwrap();
    let again = t0.elapsed();
    assert!(
        dropped >= Duration::from_millis(900) && again >= dropped + Duration::from_millis(900),
        "dropped after {dropped:?}, tried again after {again:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_inactivity_probe_drops_a_silent_peer_and_keeps_a_live_one() {
    let opts = ConnOptions {
        probe_interval: Duration::from_millis(300),
        ..ConnOptions::service(VersionSet::ALL)
    };
    let r = Running::start(opts, |_| {}, ());
    let mut silent = client(&r.mgmt);
    let mut live = client(&r.mgmt);
    let t0 = Instant::now();
    // The live peer answers the probes; the silent one gets one probe and is dropped.
    let live_thread = thread::spawn(move || {
        let mut probes = 0;
        while let Some(m) = read_msg(&mut live) {
            assert_eq!(m[1], OFPT_ECHO_REQUEST);
            live.write_all(&msg(
                4,
                OFPT_ECHO_REPLY,
                u32::from_be_bytes([m[4], m[5], m[6], m[7]]),
                &[],
            ))
            .unwrap();
            probes += 1;
            if probes == 5 {
                return live;
            }
        }
        panic!("the live peer was dropped");
    });
    let probe = read_msg(&mut silent).unwrap();
    assert_eq!((probe[0], probe[1]), (4, OFPT_ECHO_REQUEST));
    let first = t0.elapsed();
    assert_eq!(read_msg(&mut silent), None);
    let dropped = t0.elapsed();
    assert!(
        first >= Duration::from_millis(250) && dropped >= Duration::from_millis(550),
        "probe after {first:?}, dropped after {dropped:?}"
    );
    let mut live = live_thread.join().unwrap();
    assert_eq!(echo(&mut live, 77)[1], OFPT_ECHO_REPLY);
    let st = r.handle.status().unwrap();
    assert_eq!(st.len(), 1, "{st:?}");
}

#[test]
fn sending_to_a_silent_peer_does_not_put_off_its_probe() {
    let probe = Duration::from_millis(300);
    let opts = ConnOptions {
        probe_interval: probe,
        ..ConnOptions::service(VersionSet::ALL)
    };
    let r = Running::start(opts, |_| {}, ());
    let mut s = client(&r.mgmt);
    let t0 = Instant::now();
    // Packet-ins every 50 ms, as ovs-vswitchd keeps sending them to a controller that says
    // nothing: it probes after 5 s all the same, and hangs up 5 s later.
    let h = r.handle.clone();
    let sender = thread::spawn(move || {
        while t0.elapsed() < Duration::from_secs(2) {
            h.send(Dest::All, msg(4, 10, 0, &[0; 16]), MsgKind::Async);
            thread::sleep(Duration::from_millis(50));
        }
    });
    let mut probed = None;
    while let Some(m) = read_msg(&mut s) {
        if m[1] == OFPT_ECHO_REQUEST {
            probed.get_or_insert(t0.elapsed());
        }
    }
    let (probed, closed) = (probed.expect("an echo request"), t0.elapsed());
    assert!(
        probed < probe * 2 && closed < probe * 4,
        "probe after {probed:?}, closed after {closed:?}"
    );
    sender.join().unwrap();
}

#[test]
fn bad_lengths_and_garbage_drop_only_their_own_connection() {
    let r = Running::start(ConnOptions::service(VersionSet::ALL), |_| {}, ());
    let mut good = client(&r.mgmt);
    // A length shorter than the header, after the hello.
    let mut bad_len = client(&r.mgmt);
    bad_len.write_all(&[4, 5, 0, 3, 0, 0, 0, 9]).unwrap();
    assert_eq!(read_msg(&mut bad_len), None);
    // Garbage instead of a hello: whole "messages" of no version, of any type but hello's,
    // or with a length shorter than a header.
    for junk in [
        &b"\xde\xad\x00\x10garbage!"[..],
        b"\x04\x02\x00\x08\x00\x00\x00\x00",
        b"\x00\x00\x00\x00\x00\x00\x00\x00",
    ] {
        let mut garbage = UnixStream::connect(&r.mgmt).unwrap();
        garbage
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        garbage.write_all(junk).unwrap();
        assert_eq!(read_msg(&mut garbage).unwrap()[1], OFPT_HELLO);
        assert_eq!(read_msg(&mut garbage), None);
    }
    // A message that claims more than it sends, then hangs up.
    let mut short = client(&r.mgmt);
    short.write_all(&[4, 5, 0xff, 0xff, 0, 0, 0, 1, 2]).unwrap();
    drop(short);
    let reply = echo(&mut good, 5);
    assert_eq!(reply, msg(4, OFPT_ECHO_REPLY, 5, b"ping"));
    assert!(
        eventually(Duration::from_secs(5), || r.handle.status().unwrap().len()
            == 1),
        "{:?}",
        r.handle.status()
    );
}

#[test]
fn random_bytes_from_many_peers_leave_the_loop_serving() {
    let r = Running::start(ConnOptions::service(VersionSet::ALL), |_| {}, ());
    // xorshift: the same bytes every run.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let peers: Vec<_> = (0..64)
        .map(|i| {
            let mut bytes: Vec<u8> = (0..1024).map(|_| next() as u8).collect();
            if i % 2 == 0 {
                // Past the hello, into the message loop.
                bytes.splice(0..0, hello_of(VersionSet::ALL));
            }
            let path = r.mgmt.clone();
            thread::spawn(move || {
                let mut s = UnixStream::connect(path).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
                let _ = s.write_all(&bytes);
                while read_msg(&mut s).is_some() {}
            })
        })
        .collect();
    for p in peers {
        p.join().unwrap();
    }
    let mut good = client(&r.mgmt);
    assert_eq!(echo(&mut good, 1)[1], OFPT_ECHO_REPLY);
    drop(good);
    assert!(eventually(Duration::from_secs(5), || r
        .handle
        .status()
        .unwrap()
        .is_empty()));
}

/// Counts the messages it is given.
#[derive(Default)]
struct Recorder(Arc<AtomicUsize>);

impl Handler for Recorder {
    fn handle(&mut self, conn: &ConnInfo, m: &[u8], replies: &mut Vec<u8>) {
        assert_eq!(conn.version.wire(), m[0]);
        self.0.fetch_add(1, Ordering::Relaxed);
        // A barrier request (OpenFlow 1.3: 20) gets its reply (21).
        if m[1] == 20 {
            replies.extend_from_slice(&msg(
                m[0],
                21,
                u32::from_be_bytes([m[4], m[5], m[6], m[7]]),
                &[],
            ));
        }
    }
}

#[test]
fn a_peer_that_stops_reading_loses_async_messages_but_no_reply() {
    let rec = Recorder::default();
    let seen = rec.0.clone();
    let r = Running::start(ConnOptions::service(VersionSet::ALL), |_| {}, rec);
    let mut s = client(&r.mgmt);
    // Many barrier requests, none of the replies read yet.
    const N: u32 = 20_000;
    let mut w = s.try_clone().unwrap();
    let writer = thread::spawn(move || {
        for xid in 0..N {
            w.write_all(&msg(4, 20, xid, &[])).unwrap();
        }
    });
    // The switch stops reading once its socket and queue are full.
    thread::sleep(Duration::from_millis(500));
    let handled = seen.load(Ordering::Relaxed);
    assert!(
        handled < N as usize,
        "all {handled} read with no reply taken"
    );
    // Packet-ins meanwhile: most dropped, and counted.
    let pin = msg(4, 10, 0, &[0; 64]);
    for _ in 0..1000 {
        r.handle.send(Dest::All, pin.clone(), MsgKind::Async);
    }
    let st = r.handle.status().unwrap();
    assert_eq!(st.len(), 1);
    assert!(st[0].counters.async_dropped >= 800, "{st:?}");
    assert!(st[0].tx_queued <= 100 + 100, "{st:?}");
    // Now the peer reads: every reply arrives, in order.
    let mut next_xid = 0;
    let mut pins = 0u64;
    while next_xid < N {
        let m = read_msg(&mut s).unwrap();
        match m[1] {
            21 => {
                assert_eq!(u32::from_be_bytes([m[4], m[5], m[6], m[7]]), next_xid);
                next_xid += 1;
            }
            10 => pins += 1,
            t => panic!("unexpected type {t}"),
        }
    }
    writer.join().unwrap();
    let st = r.handle.status().unwrap();
    assert_eq!(pins + st[0].counters.async_dropped, 1000, "{st:?}");
    assert_eq!(seen.load(Ordering::Relaxed), N as usize);
}

#[test]
fn other_threads_add_and_remove_listeners_and_controllers() {
    let r = Running::start(ConnOptions::service(VersionSet::ALL), |_| {}, ());
    let opts = ConnOptions::service(VersionSet::ALL);
    let (lid, bound) = r
        .handle
        .listen(&Target::PTcp("127.0.0.1:0".parse().unwrap()), opts)
        .unwrap();
    let Target::PTcp(addr) = bound else {
        panic!("{bound}")
    };
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&hello_of(VersionSet::of(&[Version::Of14])))
        .unwrap();
    assert_eq!(read_msg(&mut s).unwrap()[1], OFPT_HELLO);
    s.write_all(&msg(5, OFPT_ECHO_REQUEST, 3, &[])).unwrap();
    assert_eq!(read_msg(&mut s).unwrap(), msg(5, OFPT_ECHO_REPLY, 3, &[]));
    r.handle.close_listener(lid);
    assert!(eventually(Duration::from_secs(5), || TcpStream::connect(
        addr
    )
    .is_err()));
    // The connection it accepted stays.
    s.write_all(&msg(5, OFPT_ECHO_REQUEST, 4, &[])).unwrap();
    assert_eq!(read_msg(&mut s).unwrap(), msg(5, OFPT_ECHO_REPLY, 4, &[]));

    // A controller added and closed from here: the switch hangs up and stays away.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let id = r.handle.connect(
        Target::Tcp(l.local_addr().unwrap()),
        ConnOptions::controller(VersionSet::ALL),
    );
    let mut c = controller_accept(&l);
    let st = r.handle.status().unwrap();
    assert!(st.iter().any(|s| s.id == id && s.role == Role::Primary));
    r.handle.close(id);
    assert_eq!(read_msg(&mut c), None);
    l.set_nonblocking(true).unwrap();
    thread::sleep(Duration::from_millis(1500));
    assert!(
        l.accept().is_err(),
        "a closed controller is not reconnected"
    );
    assert!(r.handle.status().unwrap().iter().all(|s| s.id != id));
}

#[test]
fn a_snooper_sees_what_the_controller_connection_exchanges() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let (r, snoop_path) = with_snooping(Some(l.local_addr().unwrap()));
    let mut ctl = controller_accept(&l);
    assert!(matches!(
        r.events.recv_timeout(Duration::from_secs(10)),
        Ok(ConnEvent::Connected {
            role: Role::Primary,
            ..
        })
    ));
    let mut snooper = client(&snoop_path);
    assert!(eventually(Duration::from_secs(5), || r
        .handle
        .status()
        .unwrap()
        .iter()
        .any(|s| s.role == Role::Snoop && s.state == ConnState::Active)));
    let req = msg(6, OFPT_ECHO_REQUEST, 9, b"snoop");
    ctl.write_all(&req).unwrap();
    let reply = read_msg(&mut ctl).unwrap();
    assert_eq!(reply, msg(6, OFPT_ECHO_REPLY, 9, b"snoop"));
    let features = msg(6, 5, 10, &[]);
    ctl.write_all(&features).unwrap();
    assert_eq!(read_msg(&mut snooper).unwrap(), req);
    assert_eq!(read_msg(&mut snooper).unwrap(), reply);
    assert_eq!(read_msg(&mut snooper).unwrap(), features);
    // Packet-ins for every connection are not for snoopers.
    r.handle
        .send(Dest::All, msg(6, 10, 0, &[1; 24]), MsgKind::Async);
    let pin = read_msg(&mut ctl).unwrap();
    assert_eq!(
        read_msg(&mut snooper).unwrap(),
        pin,
        "a copy of what the controller got"
    );
    // What a snooper sends reaches no one; it is answered its echoes all the same.
    assert_eq!(echo(&mut snooper, 11)[1], OFPT_ECHO_REPLY);
}

#[test]
fn a_snooper_with_no_controller_to_watch_is_closed() {
    let (r, p) = with_snooping(None);
    let mut s = UnixStream::connect(p).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(read_msg(&mut s), None);
    assert!(r.handle.status().unwrap().is_empty());
}

#[test]
fn ovs_ofctl_snoop_prints_the_controller_s_messages() {
    let Some(ofctl) = ovs_ofctl() else { return };
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let (r, snoop_path) = with_snooping(Some(l.local_addr().unwrap()));
    let mut ctl = controller_accept(&l);
    let mut snoop = Command::new(ofctl)
        .args(["-O", "OpenFlow15", "snoop"])
        // Where its own control socket goes.
        .env("OVS_RUNDIR", r.mgmt.parent().unwrap())
        .arg(format!("unix:{}", snoop_path.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(eventually(Duration::from_secs(10), || r
        .handle
        .status()
        .unwrap()
        .iter()
        .any(|s| s.role == Role::Snoop && s.state == ConnState::Active)));
    ctl.write_all(&msg(6, OFPT_ECHO_REQUEST, 9, b"")).unwrap();
    read_msg(&mut ctl).unwrap();
    thread::sleep(Duration::from_millis(300));
    snoop.kill().unwrap();
    let out = snoop.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(
            "OFPT_ECHO_REQUEST (OF1.5) (xid=0x9): 0 bytes of payload\n\
             OFPT_ECHO_REPLY (OF1.5) (xid=0x9): 0 bytes of payload\n"
        ),
        "{text}"
    );
}

#[test]
fn settings_change_on_live_connections() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let quiet = ConnOptions {
        probe_interval: Duration::ZERO,
        ..ConnOptions::controller(VersionSet::ALL)
    };
    let mut ids = None;
    let r = Running::start(
        ConnOptions::service(VersionSet::ALL),
        |lp| {
            let lid = lp.listeners()[0].0;
            ids = Some((lp.connect(Target::Tcp(l.local_addr().unwrap()), quiet), lid));
        },
        (),
    );
    let (id, mgmt) = ids.unwrap();
    let mut ctl = controller_accept(&l);
    // A probe turned on for a silent controller: an echo request within the new interval.
    let probing = ConnOptions {
        probe_interval: Duration::from_millis(200),
        ..quiet
    };
    r.handle.configure(id, probing);
    let t0 = Instant::now();
    let m = read_msg(&mut ctl).unwrap();
    assert_eq!((m[0], m[1]), (6, OFPT_ECHO_REQUEST));
    assert!(t0.elapsed() < Duration::from_secs(2));
    // Other versions: the switch hangs up and comes back to negotiate them.
    let of13 = VersionSet::of(&[Version::Of13]);
    r.handle.configure(
        id,
        ConnOptions {
            versions: of13,
            ..probing
        },
    );
    while read_msg(&mut ctl).is_some() {}
    let (mut again, _) = l.accept().unwrap();
    again
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(read_msg(&mut again).unwrap(), hello_of(of13));
    // A listener's new versions hold for what it accepts from then on.
    r.handle
        .configure_listener(mgmt, ConnOptions::service(of13));
    assert!(eventually(Duration::from_secs(5), || {
        let mut s = UnixStream::connect(&r.mgmt).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        read_msg(&mut s).unwrap() == hello_of(of13)
    }));
}

/// A loop with bridge `br0`'s `.mgmt` and `.snoop` listeners and, if given, a controller;
/// and the path of the `.snoop` socket.
fn with_snooping(controller: Option<std::net::SocketAddr>) -> (Running, PathBuf) {
    let mut snoop_path = PathBuf::new();
    let r = Running::start(
        ConnOptions::service(VersionSet::ALL),
        |lp| {
            let (_, Target::PUnix(mgmt)) = &lp.listeners()[0] else {
                unreachable!("Running::start listens on br0.mgmt")
            };
            let [_, snoop] = bridge_targets(mgmt.parent().unwrap(), "br0");
            lp.listen_snoop(&snoop, VersionSet::ALL).unwrap();
            if let Target::PUnix(p) = snoop {
                snoop_path = p;
            }
            if let Some(addr) = controller {
                lp.connect(Target::Tcp(addr), ConnOptions::controller(VersionSet::ALL));
            }
        },
        (),
    );
    (r, snoop_path)
}
