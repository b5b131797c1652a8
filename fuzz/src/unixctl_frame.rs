//! Invariant checks of the `unixctl_frame` fuzz target, shared with the crash-regression test
//! (`crates/unixctl/tests/fuzz_regressions.rs` path-imports this file, and the crate's
//! `framer.rs` and `proto.rs` as the target does), so that a committed input is replayed
//! through exactly the checks that found it.
//!
//! The input's first byte picks the size of the reads (1 to 256 bytes) and the size limit of
//! a message (one of [`LIMITS`]); the rest is a byte stream a control-socket client could
//! send. It goes through the server's framing loop:
//! - the framer never holds more than the limit and one read: a message that does not close
//!   within the limit is refused ([`FrameError::TooLarge`]) and the connection closed;
//! - every frame is a whole object of the stream (`{` to its closing bracket, at most the
//!   limit long) and the frames appear in the stream in order;
//! - every frame through the request parser: a request that parses has an id and reads back
//!   the same once written again (as the client writes requests); the replies the server
//!   writes (to it and to anything it refuses) read back to the same outcome through the
//!   client's reply decoder, which must never panic on a frame either.

use crate::framer::{FrameError, Framer};
use crate::proto;

/// Message size limits the first byte chooses among: small ones to reach the limit.
pub const LIMITS: [usize; 4] = [16, 64, 1024, 1 << 20];

/// Runs every check on `data`.
pub fn check_unixctl_frame(data: &[u8]) {
    let Some((&sel, stream)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(sel & 0x3f) * 4 + 1;
    let max = LIMITS[usize::from(sel >> 6)];
    let mut framer = Framer::new(max);
    // Where in `stream` the next frame may start.
    let mut at = 0;
    'read: for piece in stream.chunks(chunk) {
        framer.push(piece);
        loop {
            match framer.next_frame() {
                Ok(None) => break,
                Ok(Some(frame)) => {
                    assert!(frame.len() <= max, "a frame of {} bytes", frame.len());
                    assert_eq!(frame.first(), Some(&b'{'));
                    assert!(matches!(frame.last(), Some(b'}' | b']')));
                    let start = at
                        + stream[at..]
                            .iter()
                            .position(|b| !b.is_ascii_whitespace())
                            .expect("a frame where only whitespace is left");
                    assert_eq!(
                        stream.get(start..start + frame.len()),
                        Some(&frame[..]),
                        "the frame is not the stream's next object"
                    );
                    at = start + frame.len();
                    check_frame(&frame);
                }
                // The server answers once and closes the connection.
                Err(FrameError::NotAnObject | FrameError::TooLarge) => break 'read,
            }
        }
        assert!(
            framer.buffered() <= max + chunk,
            "framer holds {} bytes (limit {max}, reads of {chunk})",
            framer.buffered()
        );
    }
}

/// One frame through the server's request parser and the client's reply decoder.
fn check_frame(frame: &[u8]) {
    match proto::parse_request(frame) {
        Ok(req) => {
            assert!(!req.id.is_null(), "a request without an id");
            // The client writes string arguments and numeric ids; such a request reads back.
            if let (Some(id), Some(args)) = (
                req.id.as_u64(),
                req.params
                    .iter()
                    .map(|p| p.as_str())
                    .collect::<Option<Vec<_>>>(),
            ) {
                let again = proto::parse_request(&proto::encode_request(id, &req.method, &args))
                    .unwrap_or_else(|e| panic!("a written request does not read: {}", e.reason));
                assert_eq!(again.id, req.id);
                assert_eq!(again.method, req.method);
                assert_eq!(again.params, req.params);
            }
            check_reply(&req.id, &Ok(req.method.clone()));
            check_reply(
                &req.id,
                &Err(format!("\"{}\" is not a command\n", req.method)),
            );
        }
        Err(bad) => check_reply(&bad.id, &Err(bad.reason)),
    }
    // A server's reply is untrusted by the client: no frame may panic its decoder.
    let _ = proto::decode_reply(frame, 0);
}

/// A reply the server writes reads back to the same outcome (the client checks numeric ids).
fn check_reply(id: &serde_json::Value, outcome: &Result<String, String>) {
    let reply = proto::encode_reply(id, outcome);
    let mut f = Framer::new(usize::MAX);
    f.push(&reply);
    assert_eq!(
        f.next_frame(),
        Ok(Some(reply.clone())),
        "a reply is not one frame"
    );
    if let Some(n) = id.as_u64() {
        let back = proto::decode_reply(&reply, n).expect("a written reply reads");
        assert_eq!(&back, outcome);
    }
}
