//! The [`Idl`] against a scripted server on a unix socket, for what Debian's `ovsdb-server`
//! never does: refuse `monitor_cond_since` and `monitor_cond` (an older server), send its own
//! `echo` on a unix socket, and send bytes that are not JSON.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ovsdb::jsonrpc::{Framer, Message};
use ovsdb::{Datum, Idl, IdlOptions, IdlState};
use serde_json::json;

const U1: &str = "00000000-0000-0000-0000-000000000001";
const U2: &str = "00000000-0000-0000-0000-000000000002";

fn send(s: &mut UnixStream, m: Message) {
    s.write_all(&m.to_bytes()).unwrap();
}

/// Serves one connection; reports each request's method and the replies the client sends.
fn serve(mut s: UnixStream, events: &mpsc::Sender<String>, garbage_at_end: bool) {
    let mut framer = Framer::default();
    let mut buf = [0u8; 4096];
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        framer.feed(&buf[..n]);
        while let Some(m) = framer.next_message().unwrap() {
            match m {
                Message::Request { method, params, id } => {
                    let _ = events.send(method.clone());
                    match method.as_str() {
                        "get_schema" => send(
                            &mut s,
                            Message::Reply {
                                result: json!({"name": "T", "version": "1.0.0", "tables": {
                                "Bridge": {"columns": {"name": {"type": "string"}}}}}),
                                id,
                            },
                        ),
                        "monitor_cond_since" | "monitor_cond" => send(
                            &mut s,
                            Message::Error {
                                error: json!("unknown method"),
                                id,
                            },
                        ),
                        "monitor" => {
                            assert_eq!(params[2], json!({"Bridge": {"columns": ["name"]}}));
                            send(
                                &mut s,
                                Message::Reply {
                                    result: json!({"Bridge": {U1: {"new": {"name": "br0"}}}}),
                                    id,
                                },
                            );
                            send(
                                &mut s,
                                Message::Request {
                                    method: "echo".into(),
                                    params: json!(["ping"]),
                                    id: json!("srv"),
                                },
                            );
                            send(
                                &mut s,
                                Message::Notify {
                                    method: "update".into(),
                                    params: json!([params[1], {"Bridge": {U2: {"new": {"name": "br1"}}}}]),
                                },
                            );
                        }
                        "transact" => {
                            assert_eq!(params[0], "T");
                            send(
                                &mut s,
                                Message::Reply {
                                    result: json!([{}]),
                                    id,
                                },
                            );
                            if garbage_at_end {
                                s.write_all(b"} not json").unwrap();
                            }
                        }
                        _ => send(
                            &mut s,
                            Message::Error {
                                error: json!("unknown method"),
                                id,
                            },
                        ),
                    }
                }
                Message::Reply { result, id } if id == json!("srv") => {
                    let _ = events.send(format!("echo reply {result}"));
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }
}

fn names(idl: &Idl) -> Vec<String> {
    idl.snapshot()
        .rows("Bridge")
        .map(|(_, r)| r["name"].as_str().unwrap().to_owned())
        .collect()
}

fn until(mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

#[test]
fn falls_back_to_monitor_answers_echo_and_reconnects_after_garbage() {
    let path = std::env::temp_dir().join(format!("ovsdb-fake-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).unwrap();
    let (tx, rx) = mpsc::channel();
    let server = std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        serve(s, &tx, true);
        let (s, _) = listener.accept().unwrap();
        serve(s, &tx, false);
    });
    let idl = Idl::start(IdlOptions {
        target: format!("unix:{}", path.display()),
        db: "T".into(),
        lock: None,
        columns: vec![("Bridge".into(), vec![]), ("Absent".into(), vec![])],
    });
    assert!(
        until(|| idl.state() == IdlState::Monitoring && names(&idl).len() == 2),
        "{:?}",
        idl.last_error()
    );
    assert_eq!(names(&idl), ["br0", "br1"]);
    let seen: Vec<String> = rx.iter().take(5).collect();
    assert_eq!(
        seen,
        [
            "get_schema",
            "monitor_cond_since",
            "monitor_cond",
            "monitor",
            "echo reply [\"ping\"]"
        ]
    );

    // The server's garbage drops the connection; the next one goes straight to `monitor`.
    assert_eq!(
        idl.transact(vec![json!({"op": "comment", "comment": "x"})])
            .unwrap(),
        [json!({})]
    );
    let seen: Vec<String> = rx.iter().take(3).collect();
    assert_eq!(seen, ["transact", "get_schema", "monitor"]);
    assert!(until(|| idl.state() == IdlState::Monitoring));
    assert!(idl.last_error().is_none());
    assert_eq!(
        *idl.snapshot().get("Bridge", U1.parse().unwrap(), "name"),
        Datum::string("br0")
    );
    idl.stop();
    server.join().unwrap();
    let _ = std::fs::remove_file(&path);
}
