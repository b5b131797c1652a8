//! A connection's receive path driven by a byte stream, without a socket: the framing of the
//! stream into messages, the hello exchange, the echoes and the version check that
//! [`vconn`](super::vconn) does before the message layer sees anything, run over bytes read in
//! chunks of any size. The fuzz target of the message decoder sends arbitrary streams through
//! it; the connection tests use it to see what a connection makes of its input.

use std::io::{self, Read};
use std::time::{Duration, Instant};

use super::vconn::{ConnError, DEFAULT_ASYNC_QUEUE, Incoming, Vconn};
use crate::header::Version;
use crate::hello::VersionSet;

/// What a connection made of its input, in order.
#[derive(Debug, PartialEq)]
pub enum Received {
    /// The hello exchange ended on this version.
    Connected(Version),
    /// A message for the message layer, header included.
    Msg(Vec<u8>),
    /// The connection ended with this error.
    Failed(ConnError),
}

/// What [`receive`] saw.
#[derive(Debug)]
pub struct RxRun {
    /// What the connection made of its input.
    pub got: Vec<Received>,
    /// What it wrote back: its hello, echo replies, errors.
    pub sent: Vec<u8>,
    /// The most bytes it held at once waiting for the rest of a message.
    pub max_buffered: usize,
}

/// A reader that hands out at most `chunk` bytes a read, as a socket may.
struct Chunked<'a> {
    input: &'a [u8],
    chunk: usize,
}

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.chunk).min(self.input.len());
        buf[..n].copy_from_slice(&self.input[..n]);
        self.input = &self.input[n..];
        Ok(n)
    }
}

/// Feeds `input` to a new connection that allows `allowed`, `chunk` bytes (at least 1) a read,
/// until it ends or the input does.
pub fn receive(allowed: VersionSet, input: &[u8], chunk: usize) -> RxRun {
    let mut v = Vconn::new(allowed, Duration::ZERO, DEFAULT_ASYNC_QUEUE, Instant::now());
    let mut r = Chunked {
        input,
        chunk: chunk.max(1),
    };
    let mut max_buffered = 0;
    let (got, sent) = drive(&mut v, &mut r, &mut |v| {
        max_buffered = max_buffered.max(v.buffered());
    });
    RxRun {
        got,
        sent,
        max_buffered,
    }
}

/// Runs connection `v` on what `r` gives until it ends or `r` has nothing more (`after_read`
/// sees it after each read): what it made of the input, and what it wrote back.
pub(crate) fn drive(
    v: &mut Vconn,
    r: &mut impl Read,
    after_read: &mut dyn FnMut(&Vconn),
) -> (Vec<Received>, Vec<u8>) {
    let mut out = Vec::new();
    let now = Instant::now();
    loop {
        match v.next_message(now) {
            Ok(Some(Incoming::Connected(ver))) => out.push(Received::Connected(ver)),
            Ok(Some(Incoming::Message(m))) => out.push(Received::Msg(v.message(m).to_vec())),
            Ok(None) => {
                let filled = v.fill(r);
                after_read(v);
                match filled {
                    Ok(true) => {}
                    Ok(false) | Err(ConnError::Eof) => break,
                    Err(e) => {
                        out.push(Received::Failed(e));
                        break;
                    }
                }
            }
            Err(e) => {
                out.push(Received::Failed(e));
                break;
            }
        }
    }
    let mut sent = Vec::new();
    // writing to a vector cannot fail
    let _ = v.write_to(&mut sent);
    (out, sent)
}
