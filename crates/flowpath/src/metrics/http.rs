//! The smallest HTTP/1.1 server a Prometheus scrape needs (RFC 9112), on threads of its own:
//! `GET /metrics` (a query string is ignored) answers the exposition, any other path 404,
//! any other method 405, every response closes the connection.
//!
//! Nothing a client does can hold up the switch or another scraper: each connection has its
//! own thread, and at most [`MAX_CONNECTIONS`] at once (the next are answered 503 and closed,
//! as many again at once, and past those closed unanswered);
//! a request head must arrive whole, within [`MAX_REQUEST_BYTES`], in [`REQUEST_TIMEOUT`]
//! (431 or 408 otherwise, or 400 for what is not HTTP); a response that cannot be written
//! within [`WRITE_TIMEOUT`] is abandoned.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::exposition::Format;

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 8;
/// The largest request head (request line and headers).
pub const MAX_REQUEST_BYTES: usize = 8192;
/// How long a client has to send its request head.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a response may take to write.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// What answers a scrape: the exposition in the format asked for.
pub type Handler = Arc<dyn Fn(Format) -> String + Send + Sync>;

/// A listening server; stopped (its socket closed) by [`HttpServer::stop`] or when dropped.
pub struct HttpServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl HttpServer {
    /// Listens on `addr` and serves `handler`'s exposition.
    pub fn start(addr: SocketAddr, handler: Handler) -> io::Result<HttpServer> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || accept_loop(&listener, &handler, &stop2))?;
        Ok(HttpServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it listens on (the port the system gave for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops listening; connections being served finish on their own threads.
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            // The accept loop is blocked in accept(): a connection of our own wakes it.
            let mut wake = self.addr;
            if wake.ip().is_unspecified() {
                wake.set_ip(match wake {
                    SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                    SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                });
            }
            let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
            let _ = t.join();
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.shut();
    }
}

fn accept_loop(listener: &TcpListener, handler: &Handler, stop: &AtomicBool) {
    let active = Arc::new(AtomicUsize::new(0));
    let rejecting = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let Ok(conn) = conn else {
            // Out of descriptors or the like: let the condition pass.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        if active.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::AcqRel);
            turn_away(conn, &rejecting);
            continue;
        }
        let (handler, active2) = (handler.clone(), active.clone());
        let spawned = std::thread::Builder::new()
            .name("metrics-conn".into())
            .spawn(move || {
                serve(conn, &handler);
                active2.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Answers 503 to a connection over [`MAX_CONNECTIONS`], on a thread of its own that reads
/// what the client sent first for a moment (closing a socket with unread bytes resets it,
/// and the client would lose the answer); past [`MAX_CONNECTIONS`] such threads, the
/// connection is just closed.
fn turn_away(mut conn: TcpStream, rejecting: &Arc<AtomicUsize>) {
    if rejecting.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
        rejecting.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let rejecting2 = rejecting.clone();
    let spawned = std::thread::Builder::new()
        .name("metrics-busy".into())
        .spawn(move || {
            let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
            let _ = conn.set_write_timeout(Some(Duration::from_millis(200)));
            let mut head = [0u8; MAX_REQUEST_BYTES];
            let _ = conn.read(&mut head);
            let _ = respond(&mut conn, 503, "text/plain", b"too many connections\n");
            let _ = conn.shutdown(Shutdown::Both);
            rejecting2.fetch_sub(1, Ordering::AcqRel);
        });
    if spawned.is_err() {
        rejecting.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A request's head, read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Request {
    Get {
        path: String,
        accept: Option<String>,
    },
    /// A method other than GET.
    OtherMethod,
    /// The head is not HTTP/1.x.
    Bad,
    /// The head is over [`MAX_REQUEST_BYTES`].
    TooLarge,
    /// The client did not send a whole head in time, or closed.
    Incomplete,
}

/// Serves one connection: one request, one response, closed.
fn serve(mut conn: TcpStream, handler: &Handler) {
    let _ = conn.set_write_timeout(Some(WRITE_TIMEOUT));
    let _ = match read_request(&mut conn) {
        Request::Get { path, accept } => {
            let path = path.split('?').next().unwrap_or("");
            if path == "/metrics" {
                let format = Format::from_accept(accept.as_deref());
                let body = handler(format);
                respond(&mut conn, 200, format.content_type(), body.as_bytes())
            } else {
                respond(
                    &mut conn,
                    404,
                    "text/plain",
                    b"not found: the metrics are at /metrics\n",
                )
            }
        }
        Request::OtherMethod => respond(&mut conn, 405, "text/plain", b"only GET\n"),
        Request::Bad => respond(&mut conn, 400, "text/plain", b"bad request\n"),
        Request::TooLarge => respond(&mut conn, 431, "text/plain", b"request too large\n"),
        Request::Incomplete => respond(&mut conn, 408, "text/plain", b"request timeout\n"),
    };
    let _ = conn.shutdown(Shutdown::Both);
}

/// Reads a request head within the size and time limits.
fn read_request(conn: &mut TcpStream) -> Request {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = find_head_end(&buf) {
            return parse_head(&buf[..end]);
        }
        if buf.len() > MAX_REQUEST_BYTES {
            return Request::TooLarge;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || conn.set_read_timeout(Some(left)).is_err() {
            return Request::Incomplete;
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return Request::Incomplete,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Where the head ends (before its blank line), if it has.
fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").or_else(|| {
        // Tolerate bare line feeds, as RFC 9112 §2.2 allows.
        buf.windows(2).position(|w| w == b"\n\n")
    })
}

/// Parses a request head: its method, target and `Accept` header.
pub(crate) fn parse_head(head: &[u8]) -> Request {
    if head.len() > MAX_REQUEST_BYTES {
        return Request::TooLarge;
    }
    let Ok(text) = std::str::from_utf8(head) else {
        return Request::Bad;
    };
    let mut lines = text.lines();
    let mut words = lines.next().unwrap_or("").split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Request::Bad;
    };
    if !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return Request::Bad;
    }
    let mut accept = None;
    for l in lines {
        let Some((name, value)) = l.split_once(':') else {
            return Request::Bad;
        };
        if name.eq_ignore_ascii_case("accept") {
            accept = Some(value.trim().to_owned());
        }
    }
    match method {
        "GET" => Request::Get {
            path: target.to_owned(),
            accept,
        },
        m if !m.is_empty() && m.bytes().all(|b| b.is_ascii_uppercase()) => Request::OtherMethod,
        _ => Request::Bad,
    }
}

fn respond(conn: &mut TcpStream, status: u16, content_type: &str, body: &[u8]) -> io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        _ => "Service Unavailable",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes())?;
    conn.write_all(body)?;
    conn.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads() {
        assert_eq!(
            parse_head(
                b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: application/openmetrics-text"
            ),
            Request::Get {
                path: "/metrics?x=1".into(),
                accept: Some("application/openmetrics-text".into())
            }
        );
        assert_eq!(parse_head(b"POST /metrics HTTP/1.1"), Request::OtherMethod);
        assert_eq!(parse_head(b"\x16\x03\x01garbage"), Request::Bad);
        assert_eq!(parse_head(b"GET /metrics"), Request::Bad);
        assert_eq!(
            parse_head(b"GET /metrics HTTP/1.1\r\nno colon"),
            Request::Bad
        );
    }

    /// A server on a free port answering "ok".
    fn server() -> HttpServer {
        HttpServer::start(
            "127.0.0.1:0".parse().unwrap(),
            Arc::new(|f| format!("ok {f:?}\n")),
        )
        .unwrap()
    }

    fn get(addr: SocketAddr, req: &[u8]) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(req).unwrap();
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        out
    }

    #[test]
    fn serves_metrics_404_elsewhere_and_survives_bad_clients() {
        let s = server();
        let a = s.local_addr();
        let ok = get(a, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("text/plain; version=0.0.4"), "{ok}");
        assert!(ok.ends_with("\r\n\r\nok Prometheus\n"), "{ok}");
        let om = get(
            a,
            b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n",
        );
        assert!(om.ends_with("ok OpenMetrics\n"), "{om}");
        assert!(get(a, b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(a, b"garbage\r\n\r\n").starts_with("HTTP/1.1 400"));
        let mut huge = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        huge.extend(std::iter::repeat_n(b'a', 3 * MAX_REQUEST_BYTES));
        assert!(get(a, &huge).starts_with("HTTP/1.1 431"));
        // Silent clients take every connection slot; the next is turned away at once, and a
        // scrape works again when they go.
        let silent: Vec<TcpStream> = (0..MAX_CONNECTIONS)
            .map(|_| TcpStream::connect(a).unwrap())
            .collect();
        // (A connection answered a moment ago may still hold its slot: probe until full.)
        let t = Instant::now();
        loop {
            let probe = get(a, b"GET /metrics HTTP/1.1\r\n\r\n");
            if probe.starts_with("HTTP/1.1 503") {
                break;
            }
            assert!(probe.starts_with("HTTP/1.1 200"), "{probe:?}");
            assert!(t.elapsed() < Duration::from_secs(2), "never full");
        }
        drop(silent);
        let t = Instant::now();
        loop {
            let r = get(a, b"GET /metrics HTTP/1.1\r\n\r\n");
            if r.starts_with("HTTP/1.1 200") {
                break;
            }
            assert!(t.elapsed() < REQUEST_TIMEOUT * 2, "{r}");
            std::thread::sleep(Duration::from_millis(50));
        }
        s.stop();
        assert!(TcpStream::connect(a).is_err());
    }
}
