//! The server and the in-crate client over real unix sockets: protocol, OVS texts, robustness
//! against bad peers, socket file handling.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Barrier, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use common::{TempDir, registry};
use serde_json::{Value, json};
use unixctl::{Client, Error, Server, ServerConfig};

/// Safety net for raw sockets in tests, so a bug shows as a failure rather than a hang.
const GUARD: Duration = Duration::from_secs(20);

fn serve(dir: &TempDir) -> Server {
    Server::bind(dir.sock(), registry()).unwrap()
}

fn raw(server: &Server) -> UnixStream {
    let s = UnixStream::connect(server.path()).unwrap();
    s.set_read_timeout(Some(GUARD)).unwrap();
    s
}

/// Reads until one complete JSON value has arrived; returns it and whatever followed.
fn read_value(s: &mut UnixStream, buf: &mut Vec<u8>) -> Value {
    loop {
        let mut it = serde_json::Deserializer::from_slice(buf).into_iter::<Value>();
        match it.next() {
            Some(Ok(v)) => {
                let used = it.byte_offset();
                buf.drain(..used);
                return v;
            }
            Some(Err(e)) if !e.is_eof() => panic!("server sent bad JSON: {e}"),
            _ => {}
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).expect("read reply");
        assert!(
            n > 0,
            "EOF before a complete reply; got {:?}",
            String::from_utf8_lossy(buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Everything the server sends until it closes the connection.
fn read_to_close(s: &mut UnixStream) -> Vec<Value> {
    let mut bytes = Vec::new();
    match s.read_to_end(&mut bytes) {
        Ok(_) => {}
        // The server may close with our unread bytes in its queue; what it sent before is
        // still delivered first, so a reset can only come after the data.
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        Err(e) => panic!("read: {e}"),
    }
    serde_json::Deserializer::from_slice(&bytes)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Waits for a condition that the server reaches on its own threads.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + GUARD;
    while !cond() {
        assert!(Instant::now() < end, "never happened: {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

fn call(server: &Server, method: &str, args: &[&str]) -> Result<String, String> {
    Client::connect(server.path())
        .unwrap()
        .call(method, args)
        .unwrap()
}

#[test]
fn round_trip() {
    let dir = TempDir::new();
    let server = serve(&dir);
    assert_eq!(call(&server, "echo", &["a", "b c"]), Ok("a b c\n".into()));
    assert_eq!(call(&server, "dpif/add", &["2", "40"]), Ok("42\n".into()));
    assert_eq!(call(&server, "echo", &[]), Ok(String::new()));
    // Arguments travel as JSON strings: quotes, backslashes, newlines and non-ASCII survive.
    let odd = "q\"u\\o\nte — ünï {}[]";
    assert_eq!(call(&server, "echo", &[odd]), Ok(format!("{odd}\n")));
}

#[test]
fn error_reply() {
    let dir = TempDir::new();
    let server = serve(&dir);
    assert_eq!(call(&server, "fail", &[]), Err("it failed\n".into()));
    assert_eq!(
        call(&server, "dpif/add", &["x", "1"]),
        Err("x: invalid digit found in string\n".into())
    );
    // On the wire an error is {"id":..,"error":..} with no "result", as OVS writes it.
    let mut s = raw(&server);
    s.write_all(br#"{"id":9,"method":"fail","params":["no"]}"#)
        .unwrap();
    let v = read_value(&mut s, &mut Vec::new());
    assert_eq!(v, json!({"id": 9, "error": "no\n"}));
}

#[test]
fn unknown_command_text() {
    let dir = TempDir::new();
    let server = serve(&dir);
    assert_eq!(
        call(&server, "nosuch", &["a"]),
        Err(
            "\"nosuch\" is not a valid command (use \"list-commands\" to see a list of valid \
             commands)\n"
                .into()
        )
    );
}

#[test]
fn arg_count_errors() {
    let dir = TempDir::new();
    let server = serve(&dir);
    assert_eq!(
        call(&server, "dpif/add", &["1"]),
        Err("\"dpif/add\" command requires at least 2 arguments\n".into())
    );
    assert_eq!(
        call(&server, "dpif/add", &["1", "2", "3"]),
        Err("\"dpif/add\" command takes at most 2 arguments\n".into())
    );
    assert_eq!(
        call(&server, "version", &["x"]),
        Err("\"version\" command takes at most 0 arguments\n".into())
    );
}

#[test]
fn list_commands_and_version() {
    let dir = TempDir::new();
    let server = serve(&dir);
    assert_eq!(
        call(&server, "list-commands", &[]),
        Ok("The available commands are:\n\
            \x20 dpif/add                A B\n\
            \x20 echo                    [ARG]...\n\
            \x20 fail                    [TEXT]\n\
            \x20 list-commands           \n\
            \x20 version                 \n"
            .into())
    );
    assert_eq!(
        call(&server, "version", &[]),
        Ok("flowpath (test) 0.1.0\n".into())
    );
}

#[test]
fn commands_registered_after_bind_are_served() {
    let dir = TempDir::new();
    let server = serve(&dir);
    server
        .registry()
        .register("late", "", 0, 0, |_| Ok("here".into()))
        .unwrap();
    assert_eq!(call(&server, "late", &[]), Ok("here\n".into()));
}

#[test]
fn concurrent_clients() {
    let dir = TempDir::new();
    let server = serve(&dir);
    thread::scope(|scope| {
        for t in 0..8 {
            let path = server.path().to_path_buf();
            scope.spawn(move || {
                let mut client = Client::connect(&path).unwrap();
                for i in 0..50 {
                    let (a, b) = (t.to_string(), i.to_string());
                    let sum = (t + i).to_string() + "\n";
                    assert_eq!(client.call("dpif/add", &[&a, &b]).unwrap(), Ok(sum));
                    // Half the calls on a fresh connection each.
                    if i % 2 == 0 {
                        client = Client::connect(&path).unwrap();
                    }
                }
            });
        }
    });
}

#[test]
fn several_requests_on_one_connection() {
    let dir = TempDir::new();
    let server = serve(&dir);
    let mut client = Client::connect(server.path()).unwrap();
    for i in 0..20 {
        let arg = i.to_string();
        assert_eq!(client.call("echo", &[&arg]).unwrap(), Ok(format!("{i}\n")));
    }
    assert!(client.call("nosuch", &[""]).unwrap().is_err());
    assert_eq!(
        client.call("echo", &["after error"]).unwrap(),
        Ok("after error\n".into())
    );

    // Pipelined, in one write, with and without whitespace between: answered in order.
    let mut s = raw(&server);
    s.write_all(
        br#"{"id":1,"method":"echo","params":["one"]}{"id":"two","method":"echo","params":["2"]}
           {"id":[3],"method":"version","params":[]}"#,
    )
    .unwrap();
    let mut buf = Vec::new();
    assert_eq!(
        read_value(&mut s, &mut buf),
        json!({"id": 1, "result": "one\n", "error": null})
    );
    assert_eq!(
        read_value(&mut s, &mut buf),
        json!({"id": "two", "result": "2\n", "error": null})
    );
    assert_eq!(
        read_value(&mut s, &mut buf),
        json!({"id": [3], "result": "flowpath (test) 0.1.0\n", "error": null})
    );
}

#[test]
fn non_string_argument_gets_ovs_error_and_connection_stays_open() {
    let dir = TempDir::new();
    let server = serve(&dir);
    let mut s = raw(&server);
    let mut buf = Vec::new();
    s.write_all(br#"{"id":1,"method":"echo","params":["a",{"x":1}]}"#)
        .unwrap();
    assert_eq!(
        read_value(&mut s, &mut buf),
        json!({"id": 1, "error": "\"echo\" command has non-string argument\n"})
    );
    s.write_all(br#"{"id":2,"method":"echo","params":["ok"]}"#)
        .unwrap();
    assert_eq!(
        read_value(&mut s, &mut buf),
        json!({"id": 2, "result": "ok\n", "error": null})
    );
}

#[test]
fn malformed_messages_get_an_error_and_a_close_while_others_are_served() {
    let dir = TempDir::new();
    let server = serve(&dir);
    // Another client connected throughout, to show it is not disturbed.
    let mut bystander = Client::connect(server.path()).unwrap();
    let cases: &[(&[u8], Value, &str)] = &[
        (b"{bad json}", Value::Null, "invalid JSON-RPC message: "),
        (
            b"{\"id\":1,\"method\":}",
            Value::Null,
            "invalid JSON-RPC message: ",
        ),
        (
            b"{\"id\":1,\"method\":\"echo\"]",
            Value::Null,
            "invalid JSON-RPC message: ",
        ),
        (
            b"{\"a\":\"\xff\"}",
            Value::Null,
            "invalid JSON-RPC message: ",
        ),
        (b"[1,2]", Value::Null, "not a JSON object"),
        (b"\"just a string\"", Value::Null, "not a JSON object"),
        (b"42", Value::Null, "not a JSON object"),
        (b"{\"id\":1}junk", json!(1), "\"method\" must be a string"),
        (
            b"{\"id\":2,\"method\":7,\"params\":[]}",
            json!(2),
            "\"method\" must be a string",
        ),
        (
            b"{\"id\":3,\"method\":\"echo\"}",
            json!(3),
            "\"params\" must be an array",
        ),
        (
            b"{\"id\":4,\"method\":\"echo\",\"params\":\"a\"}",
            json!(4),
            "\"params\"",
        ),
        (
            b"{\"method\":\"echo\",\"params\":[]}",
            Value::Null,
            "\"id\" is required",
        ),
        (
            b"{\"id\":5,\"result\":\"x\",\"error\":null}",
            json!(5),
            "not replies",
        ),
    ];
    for (i, (msg, id, reason)) in cases.iter().enumerate() {
        let mut s = raw(&server);
        s.write_all(msg).unwrap();
        let replies = read_to_close(&mut s);
        assert_eq!(replies.len(), 1, "case {i}: {replies:?}");
        assert_eq!(replies[0]["id"], *id, "case {i}");
        let error = replies[0]["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(reason),
            "case {i}: {error:?} lacks {reason:?}"
        );
        assert!(error.ends_with('\n'), "case {i}");
        assert_eq!(
            bystander.call("echo", &[i.to_string()]).unwrap(),
            Ok(format!("{i}\n"))
        );
    }
}

#[test]
fn oversize_message_is_refused() {
    let dir = TempDir::new();
    let server = Server::bind_with(
        dir.sock(),
        registry(),
        ServerConfig {
            max_message_bytes: 4096,
            ..ServerConfig::default()
        },
    )
    .unwrap();
    // Just under the limit is fine.
    let ok_arg = "x".repeat(4000);
    assert_eq!(call(&server, "echo", &[&ok_arg]), Ok(format!("{ok_arg}\n")));

    // A message far over the limit: the server answers and closes before reading it all, so
    // our write may fail part way; the reply is still delivered.
    let mut s = raw(&server);
    let huge = format!(
        r#"{{"id":1,"method":"echo","params":["{}"]}}"#,
        "y".repeat(1 << 20)
    );
    let _ = s.write_all(huge.as_bytes());
    let replies = read_to_close(&mut s);
    assert_eq!(
        replies,
        vec![json!({"id": null, "error": "JSON-RPC message exceeds 4096 bytes\n"})]
    );
    assert_eq!(call(&server, "echo", &["next"]), Ok("next\n".into()));
}

#[test]
fn default_limit_is_one_mebibyte() {
    let dir = TempDir::new();
    let server = serve(&dir);
    let mut s = raw(&server);
    let huge = format!(
        r#"{{"id":1,"method":"echo","params":["{}"]}}"#,
        "y".repeat(2 << 20)
    );
    let _ = s.write_all(huge.as_bytes());
    let replies = read_to_close(&mut s);
    assert_eq!(
        replies[0]["error"],
        "JSON-RPC message exceeds 1048576 bytes\n"
    );
}

#[test]
fn client_disconnecting_mid_message_leaves_no_thread_behind() {
    let dir = TempDir::new();
    let server = serve(&dir);
    for _ in 0..10 {
        let mut s = raw(&server);
        s.write_all(br#"{"id":1,"method":"echo","params":["unfinished"#)
            .unwrap();
        drop(s);
    }
    // A client that leaves after its request without reading the reply.
    let mut s = raw(&server);
    s.write_all(br#"{"id":1,"method":"echo","params":[]}"#)
        .unwrap();
    drop(s);
    assert_eq!(call(&server, "echo", &["fine"]), Ok("fine\n".into()));
    eventually("all connection threads gone", || {
        server.active_connections() == 0
    });
}

#[test]
fn idle_connection_is_closed_after_the_idle_timeout() {
    let dir = TempDir::new();
    let server = Server::bind_with(
        dir.sock(),
        registry(),
        ServerConfig {
            idle_timeout: Some(Duration::from_millis(50)),
            ..ServerConfig::default()
        },
    )
    .unwrap();
    let mut silent = raw(&server);
    let mut half = raw(&server);
    half.write_all(br#"{"id":1,"method""#).unwrap();
    // Both get EOF, with no reply, whenever the server gives up on them.
    assert_eq!(read_to_close(&mut silent), Vec::<Value>::new());
    assert_eq!(read_to_close(&mut half), Vec::<Value>::new());
    assert_eq!(call(&server, "echo", &["alive"]), Ok("alive\n".into()));
}

#[test]
fn connections_over_the_limit_are_refused_with_a_reason() {
    let dir = TempDir::new();
    let server = Server::bind_with(
        dir.sock(),
        registry(),
        ServerConfig {
            max_connections: 2,
            ..ServerConfig::default()
        },
    )
    .unwrap();
    let mut a = Client::connect(server.path()).unwrap();
    let mut b = Client::connect(server.path()).unwrap();
    // Once a and b have been answered, both are being served.
    assert_eq!(a.call("echo", &["a"]).unwrap(), Ok("a\n".into()));
    assert_eq!(b.call("echo", &["b"]).unwrap(), Ok("b\n".into()));
    let mut c = raw(&server);
    let replies = read_to_close(&mut c);
    assert_eq!(
        replies,
        vec![json!({"id": null, "error": "too many control connections (at most 2)\n"})]
    );
    drop(a);
    eventually("a slot frees up", || server.active_connections() < 2);
    assert_eq!(call(&server, "echo", &["c"]), Ok("c\n".into()));
    assert_eq!(b.call("echo", &["b"]).unwrap(), Ok("b\n".into()));
}

#[test]
fn handler_panic_is_an_error_reply() {
    let dir = TempDir::new();
    let server = serve(&dir);
    server
        .registry()
        .register("boom", "", 0, 0, |_| panic!("deliberate test panic"))
        .unwrap();
    let mut client = Client::connect(server.path()).unwrap();
    let err = client.call::<&str>("boom", &[]).unwrap().unwrap_err();
    assert_eq!(
        err,
        "\"boom\" command failed: internal error (handler panicked)\n"
    );
    assert_eq!(client.call("echo", &["ok"]).unwrap(), Ok("ok\n".into()));
}

#[test]
fn slow_handler_does_not_block_other_clients() {
    let dir = TempDir::new();
    let server = serve(&dir);
    let (release, wait) = mpsc::channel::<()>();
    let wait = std::sync::Mutex::new(wait);
    let entered = Arc::new(Barrier::new(2));
    let entered2 = Arc::clone(&entered);
    server
        .registry()
        .register("block", "", 0, 0, move |_| {
            entered2.wait();
            wait.lock().unwrap().recv().map_err(|e| e.to_string())?;
            Ok("released".into())
        })
        .unwrap();
    let path = server.path().to_path_buf();
    let blocked = thread::spawn(move || Client::connect(path).unwrap().call::<&str>("block", &[]));
    entered.wait();
    // The handler is running and holds its connection; others are still served.
    for i in 0..5 {
        assert_eq!(
            call(&server, "echo", &[&i.to_string()]),
            Ok(format!("{i}\n"))
        );
    }
    release.send(()).unwrap();
    assert_eq!(blocked.join().unwrap().unwrap(), Ok("released\n".into()));
}

#[test]
fn client_times_out_and_refuses_reuse() {
    let dir = TempDir::new();
    let server = serve(&dir);
    let (release, wait) = mpsc::channel::<()>();
    let wait = std::sync::Mutex::new(wait);
    server
        .registry()
        .register("hang", "", 0, 0, move |_| {
            let _ = wait.lock().unwrap().recv();
            Ok(String::new())
        })
        .unwrap();
    let mut client = Client::connect(server.path()).unwrap();
    client.set_timeout(Some(Duration::from_millis(50)));
    let err = client.call::<&str>("hang", &[]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut, "{err}");
    let err = client.call("echo", &["x"]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotConnected, "{err}");
    release.send(()).unwrap();
}

#[test]
fn client_rejects_a_reply_for_another_request() {
    let dir = TempDir::new();
    let listener = UnixListener::bind(dir.sock()).unwrap();
    let fake = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf).unwrap();
        s.write_all(br#"{"id":99,"result":"not yours","error":null}"#)
            .unwrap();
        let (mut s, _) = listener.accept().unwrap();
        let _ = s.read(&mut buf).unwrap();
        s.write_all(br#"{"id":0,"result":"trunc"#).unwrap();
    });
    let mut client = Client::connect(dir.sock()).unwrap();
    let err = client.call("echo", &["x"]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidData, "{err}");
    assert!(err.to_string().contains("id 99"), "{err}");

    let mut client = Client::connect(dir.sock()).unwrap();
    let err = client.call("echo", &["x"]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnexpectedEof, "{err}");
    assert!(err.to_string().contains("middle of a reply"), "{err}");
    fake.join().unwrap();
}

#[test]
fn socket_file_mode_is_0600() {
    let dir = TempDir::new();
    let server = serve(&dir);
    let mode = std::fs::metadata(server.path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");
    // No temporary files are left next to it.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec!["t.ctl"]);
}

#[test]
fn stale_socket_file_is_replaced() {
    let dir = TempDir::new();
    // A socket file whose listener is gone, as a crashed daemon leaves behind.
    drop(UnixListener::bind(dir.sock()).unwrap());
    assert!(dir.sock().exists());
    assert_eq!(
        UnixStream::connect(dir.sock()).unwrap_err().kind(),
        ErrorKind::ConnectionRefused
    );
    let server = serve(&dir);
    assert_eq!(call(&server, "echo", &["new"]), Ok("new\n".into()));
}

#[test]
fn second_server_on_a_live_path_is_refused() {
    let dir = TempDir::new();
    let first = serve(&dir);
    let err = Server::bind(dir.sock(), registry()).unwrap_err();
    assert!(matches!(err, Error::AlreadyListening { .. }), "{err}");
    assert!(err.to_string().contains("already listening"), "{err}");
    assert_eq!(call(&first, "echo", &["still me"]), Ok("still me\n".into()));
}

#[test]
fn non_socket_file_is_not_replaced() {
    let dir = TempDir::new();
    std::fs::write(dir.sock(), "precious").unwrap();
    let err = Server::bind(dir.sock(), registry()).unwrap_err();
    assert!(matches!(err, Error::NotASocket { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(dir.sock()).unwrap(), "precious");
}

#[test]
fn too_long_path_is_a_clear_error() {
    let dir = TempDir::new();
    let err = Server::bind(dir.path().join("x".repeat(120)), registry()).unwrap_err();
    assert!(matches!(err, Error::PathTooLong { max: 107, .. }), "{err}");
}

#[test]
fn missing_directory_is_an_io_error() {
    let dir = TempDir::new();
    let err = Server::bind(dir.path().join("nodir/t.ctl"), registry()).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
}

#[test]
fn shutdown_removes_the_socket_and_closes_connections() {
    let dir = TempDir::new();
    let server = serve(&dir);
    let mut idle = raw(&server);
    let mut client = Client::connect(server.path()).unwrap();
    assert_eq!(client.call("echo", &["x"]).unwrap(), Ok("x\n".into()));
    server.shutdown();
    assert!(!dir.sock().exists());
    assert_eq!(read_to_close(&mut idle), Vec::<Value>::new());
    assert!(client.call("echo", &["x"]).is_err());
    assert!(Client::connect(dir.sock()).is_err());
    // The path can be served again at once.
    let again = serve(&dir);
    assert_eq!(call(&again, "echo", &["again"]), Ok("again\n".into()));
    drop(again);
    assert!(!dir.sock().exists());
}

/// A command being answered when the server shuts down (as `exit` is: its handler asks the
/// program to stop, which shuts the server down) still gets its reply.
#[test]
fn shutdown_sends_the_reply_being_made() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = TempDir::new();
    let started = Arc::new(AtomicBool::new(false));
    let r = registry();
    let s = started.clone();
    r.register("slow-exit", "", 0, 0, move |_| {
        s.store(true, Ordering::SeqCst);
        thread::sleep(Duration::from_millis(200));
        Ok("bye".into())
    })
    .unwrap();
    let server = Server::bind(dir.sock(), r).unwrap();
    let mut client = Client::connect(server.path()).unwrap();
    let caller = thread::spawn(move || client.call("slow-exit", &[] as &[&str]).unwrap());
    eventually("the handler started", || started.load(Ordering::SeqCst));
    server.shutdown();
    assert_eq!(caller.join().unwrap(), Ok("bye\n".into()));
}

#[test]
fn drop_leaves_a_successors_socket_alone() {
    let dir = TempDir::new();
    let old = serve(&dir);
    // Someone removed the old socket and started a new server on the same path.
    std::fs::remove_file(dir.sock()).unwrap();
    let new = serve(&dir);
    drop(old);
    assert!(dir.sock().exists());
    assert_eq!(call(&new, "echo", &["new"]), Ok("new\n".into()));
}

#[test]
fn relative_socket_path_works() {
    // A bare file name lives in the current directory; use a relative path into a temp dir.
    let dir = TempDir::new();
    let cwd = std::env::current_dir().unwrap();
    let rel = pathdiff(dir.path(), &cwd).join("rel.ctl");
    let server = Server::bind(&rel, registry()).unwrap();
    assert_eq!(call(&server, "echo", &["rel"]), Ok("rel\n".into()));
    drop(server);
    assert!(!dir.path().join("rel.ctl").exists());
}

/// `target` relative to `base` (both absolute), with `..` components.
fn pathdiff(target: &std::path::Path, base: &std::path::Path) -> std::path::PathBuf {
    let t: Vec<_> = target.components().collect();
    let b: Vec<_> = base.components().collect();
    let common = t.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = std::path::PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c);
    }
    out
}
