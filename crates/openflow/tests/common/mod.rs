//! What the connection tests share: a loop on its own thread with a bridge's `.mgmt`
//! listener, and a minimal OpenFlow client.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::Receiver;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use openflow::conn::{ConnEvent, ConnOptions, EventLoop, Handler, LoopHandle, bridge_targets};
use openflow::header::{self, OFPT_ECHO_REQUEST, OFPT_HELLO, Version};
use openflow::hello::{self, VersionSet};

/// A fresh run directory.
pub fn rundir() -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "of-conn-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `ovs-ofctl`, or why the test that needs it is skipped.
pub fn ovs_ofctl() -> Option<&'static str> {
    match Command::new("ovs-ofctl").arg("--version").output() {
        Ok(o) if o.status.success() => Some("ovs-ofctl"),
        _ => {
            eprintln!("SKIPPED: ovs-ofctl (Open vSwitch) is not installed");
            None
        }
    }
}

/// A loop running on its own thread, with the `.mgmt` listener of bridge `br0` in a fresh
/// run directory.
pub struct Running {
    pub handle: LoopHandle,
    thread: Option<JoinHandle<EventLoop>>,
    pub events: Receiver<ConnEvent>,
    pub mgmt: PathBuf,
    dir: PathBuf,
}

impl Running {
    pub fn start(
        opts: ConnOptions,
        setup: impl FnOnce(&mut EventLoop),
        mut handler: impl Handler + Send + 'static,
    ) -> Running {
        let dir = rundir();
        let mut lp = EventLoop::new().unwrap();
        let [mgmt, _] = bridge_targets(&dir, "br0");
        lp.listen(&mgmt, opts).unwrap();
        setup(&mut lp);
        let events = lp.subscribe();
        let handle = lp.handle();
        let thread = thread::spawn(move || {
            lp.run(&mut handler).unwrap();
            lp
        });
        Running {
            handle,
            thread: Some(thread),
            events,
            mgmt: dir.join("br0.mgmt"),
            dir,
        }
    }

    pub fn stop(mut self) -> EventLoop {
        self.handle.stop();
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.handle.stop();
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn msg(version: u8, msg_type: u8, xid: u32, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::new();
    let at = header::start(&mut m, version, msg_type, xid);
    m.extend_from_slice(body);
    header::finish(&mut m, at).unwrap();
    m
}

pub fn hello_of(set: VersionSet) -> Vec<u8> {
    let mut m = Vec::new();
    hello::encode(set, 1, &mut m);
    m
}

/// Reads one whole message, or `None` at the end of the stream.
pub fn read_msg(s: &mut impl Read) -> Option<Vec<u8>> {
    let mut m = vec![0; header::HEADER_LEN];
    s.read_exact(&mut m).ok()?;
    let len = usize::from(u16::from_be_bytes([m[2], m[3]]));
    m.resize(len.max(header::HEADER_LEN), 0);
    s.read_exact(&mut m[header::HEADER_LEN..]).ok()?;
    Some(m)
}

/// A client that has exchanged hellos at OpenFlow 1.3 over the `.mgmt` socket.
pub fn client(path: &Path) -> UnixStream {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&hello_of(VersionSet::of(&[Version::Of13])))
        .unwrap();
    let h = read_msg(&mut s).unwrap();
    assert_eq!(h[1], OFPT_HELLO);
    s
}

pub fn echo(s: &mut UnixStream, xid: u32) -> Vec<u8> {
    s.write_all(&msg(4, OFPT_ECHO_REQUEST, xid, b"ping"))
        .unwrap();
    read_msg(s).unwrap()
}

/// Waits until `f` holds, up to `limit`.
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if f() {
            return true;
        }
        thread::sleep(Duration::from_millis(10));
    }
    f()
}
