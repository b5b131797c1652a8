//! JSON-RPC 1.0 as OVSDB speaks it (RFC 7047 §4): JSON objects written back to back on a byte
//! stream with no delimiter or length, and the four message forms: a request (method, params,
//! id), a notification (a request whose id is null), a reply (result, `"error":null`, id) and an
//! error reply (`"result":null`, error, id).
//!
//! [`Framer`] cuts the stream into messages incrementally: it scans each byte once, tracking the
//! nesting depth and whether it is inside a string, and hands a complete top-level value to
//! `serde_json`. It never panics on any input and holds at most [`Framer::max_len`] bytes of an
//! unfinished message: a peer that sends an endless value gets [`FrameError::TooLong`], and the
//! caller drops the connection.

use std::fmt;

use serde_json::{Value, json};

/// The default bound on one message: large enough for the initial contents of a database with
/// many thousands of ports.
pub const DEFAULT_MAX_LEN: usize = 64 << 20;

/// Why the stream cannot be read further.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// A message grew beyond the bound without ending.
    TooLong(usize),
    /// The bytes are not JSON, or a top-level value is not an object or array.
    Syntax(String),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::TooLong(n) => write!(f, "JSON-RPC message longer than {n} bytes"),
            FrameError::Syntax(e) => write!(f, "JSON-RPC syntax error: {e}"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Incremental splitter of a byte stream into JSON values.
#[derive(Debug)]
pub struct Framer {
    buf: Vec<u8>,
    /// How far `buf` has been scanned.
    pos: usize,
    depth: usize,
    in_string: bool,
    escape: bool,
    max_len: usize,
    failed: Option<FrameError>,
}

impl Default for Framer {
    fn default() -> Framer {
        Framer::new(DEFAULT_MAX_LEN)
    }
}

impl Framer {
    pub fn new(max_len: usize) -> Framer {
        Framer {
            buf: Vec::new(),
            pos: 0,
            depth: 0,
            in_string: false,
            escape: false,
            max_len,
            failed: None,
        }
    }

    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Bytes held that are not yet a whole message.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Adds bytes read from the stream.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.failed.is_none() {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// The next complete value, `Ok(None)` when more bytes are needed. After an error the
    /// stream cannot resynchronise: every later call returns the same error.
    pub fn next_value(&mut self) -> Result<Option<Value>, FrameError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        match self.scan() {
            Ok(Some(end)) => {
                let parsed = serde_json::from_slice::<Value>(&self.buf[..end]);
                self.buf.drain(..end);
                self.pos = 0;
                match parsed {
                    Ok(v) => Ok(Some(v)),
                    Err(e) => Err(self.fail(FrameError::Syntax(e.to_string()))),
                }
            }
            Ok(None) => {
                if self.buf.len() > self.max_len {
                    return Err(self.fail(FrameError::TooLong(self.max_len)));
                }
                Ok(None)
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// The next complete message.
    pub fn next_message(&mut self) -> Result<Option<Message>, FrameError> {
        match self.next_value()? {
            None => Ok(None),
            Some(v) => Message::from_json(v)
                .map(Some)
                .map_err(|e| self.fail(FrameError::Syntax(e))),
        }
    }

    fn fail(&mut self, e: FrameError) -> FrameError {
        self.buf = Vec::new();
        self.pos = 0;
        self.failed = Some(e.clone());
        e
    }

    /// Scans from `pos`; returns the end of a complete top-level value.
    fn scan(&mut self) -> Result<Option<usize>, FrameError> {
        while self.pos < self.buf.len() {
            let c = self.buf[self.pos];
            self.pos += 1;
            if self.in_string {
                if self.escape {
                    self.escape = false;
                } else if c == b'\\' {
                    self.escape = true;
                } else if c == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match c {
                b' ' | b'\t' | b'\r' | b'\n' if self.depth == 0 => {
                    // Whitespace between messages is dropped so it never accumulates.
                    self.buf.drain(..self.pos);
                    self.pos = 0;
                }
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    if self.depth == 0 {
                        return Err(FrameError::Syntax(format!("unexpected '{}'", c as char)));
                    }
                    self.depth -= 1;
                    if self.depth == 0 {
                        return Ok(Some(self.pos));
                    }
                }
                b'"' if self.depth > 0 => self.in_string = true,
                _ if self.depth == 0 => {
                    return Err(FrameError::Syntax(format!(
                        "a message must be a JSON object, not one starting with {:?}",
                        c as char
                    )));
                }
                _ => {}
            }
        }
        Ok(None)
    }
}

/// One JSON-RPC message.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    Request {
        method: String,
        params: Value,
        id: Value,
    },
    Notify {
        method: String,
        params: Value,
    },
    Reply {
        result: Value,
        id: Value,
    },
    Error {
        error: Value,
        id: Value,
    },
}

impl Message {
    /// Classifies a received object as OVS does: a `method` makes a request (a notification
    /// when the id is null or absent), otherwise a non-null `error` an error reply and a
    /// `result` a reply.
    pub fn from_json(v: Value) -> Result<Message, String> {
        let Value::Object(mut o) = v else {
            return Err("a JSON-RPC message must be an object".to_owned());
        };
        let id = o.remove("id").unwrap_or(Value::Null);
        if let Some(method) = o.remove("method") {
            let Value::String(method) = method else {
                return Err("\"method\" is not a string".to_owned());
            };
            let params = o.remove("params").unwrap_or(Value::Null);
            if !params.is_array() {
                return Err(format!("\"params\" of {method} is not an array"));
            }
            return Ok(if id.is_null() {
                Message::Notify { method, params }
            } else {
                Message::Request { method, params, id }
            });
        }
        match (o.remove("result"), o.remove("error")) {
            (_, Some(error)) if !error.is_null() => Ok(Message::Error { error, id }),
            (Some(result), _) => Ok(Message::Reply { result, id }),
            _ => Err("a JSON-RPC message with neither method, result nor error".to_owned()),
        }
    }

    /// The message's wire form.
    pub fn to_json(&self) -> Value {
        match self {
            Message::Request { method, params, id } => {
                json!({"method": method, "params": params, "id": id})
            }
            Message::Notify { method, params } => {
                json!({"method": method, "params": params, "id": null})
            }
            Message::Reply { result, id } => json!({"result": result, "error": null, "id": id}),
            Message::Error { error, id } => json!({"result": null, "error": error, "id": id}),
        }
    }

    /// The message as bytes to write.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.to_json().to_string().into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(f: &mut Framer) -> Result<Vec<Value>, FrameError> {
        let mut out = Vec::new();
        while let Some(v) = f.next_value()? {
            out.push(v);
        }
        Ok(out)
    }

    #[test]
    fn splits_concatenated_values_fed_byte_by_byte() {
        let stream = br#"{"id":1,"result":"a}]\"{"} [1,{"b":[2]}]
  {"method":"echo","params":[],"id":"echo"}"#;
        let mut f = Framer::default();
        let mut got = Vec::new();
        for b in stream {
            f.feed(&[*b]);
            got.extend(all(&mut f).unwrap());
        }
        assert_eq!(got.len(), 3);
        assert_eq!(got[0]["result"], "a}]\"{");
        assert_eq!(f.buffered(), 0);
        let mut f = Framer::default();
        f.feed(stream);
        assert_eq!(all(&mut f).unwrap(), got);
    }

    #[test]
    fn bounds_an_endless_value() {
        let mut f = Framer::new(1000);
        f.feed(b"{\"a\":\"");
        for _ in 0..100 {
            f.feed(&[b'x'; 100]);
            if let Err(e) = f.next_value() {
                assert_eq!(e, FrameError::TooLong(1000));
                assert!(f.buffered() == 0);
                assert_eq!(f.next_value(), Err(FrameError::TooLong(1000)));
                return;
            }
        }
        panic!("no error");
    }

    #[test]
    fn refuses_what_is_not_a_message() {
        for bad in [&b"123 "[..], b"]", b"{\"a\":}", b"nul", b"\"str\""] {
            let mut f = Framer::default();
            f.feed(bad);
            assert!(
                matches!(f.next_value(), Err(FrameError::Syntax(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let mut f = Framer::default();
        f.feed(&[b'['; 200]);
        f.feed(&[b']'; 200]);
        assert!(
            f.next_value().is_err(),
            "nesting deeper than serde_json allows"
        );
        let mut f = Framer::default();
        f.feed(b"[1]");
        assert!(matches!(f.next_message(), Err(FrameError::Syntax(_))));
    }

    #[test]
    fn message_forms() {
        let cases = [
            (
                json!({"method": "echo", "params": [], "id": "echo"}),
                Message::Request {
                    method: "echo".into(),
                    params: json!([]),
                    id: json!("echo"),
                },
            ),
            (
                json!({"method": "update3", "params": [1], "id": null}),
                Message::Notify {
                    method: "update3".into(),
                    params: json!([1]),
                },
            ),
            (
                json!({"result": {"locked": true}, "error": null, "id": 3}),
                Message::Reply {
                    result: json!({"locked": true}),
                    id: json!(3),
                },
            ),
            (
                json!({"result": null, "error": "unknown method", "id": 3}),
                Message::Error {
                    error: json!("unknown method"),
                    id: json!(3),
                },
            ),
        ];
        for (v, m) in cases {
            assert_eq!(Message::from_json(v.clone()).unwrap(), m);
            assert_eq!(m.to_json(), v);
            assert_eq!(serde_json::from_slice::<Value>(&m.to_bytes()).unwrap(), v);
        }
        // OVS leaves "result" out of an error, and the id out of a notification.
        assert!(matches!(
            Message::from_json(json!({"error": "x", "id": 1})),
            Ok(Message::Error { .. })
        ));
        assert!(matches!(
            Message::from_json(json!({"method": "locked", "params": ["l"]})),
            Ok(Message::Notify { .. })
        ));
        for bad in [
            json!({}),
            json!({"method": 1, "params": []}),
            json!({"method": "m", "params": 1, "id": 1}),
            json!([]),
        ] {
            assert!(Message::from_json(bad.clone()).is_err(), "{bad}");
        }
    }
}
