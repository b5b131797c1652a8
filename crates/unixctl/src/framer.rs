//! Splits a byte stream of back-to-back JSON objects into one slice per object.
//!
//! unixctl has no framing of its own: a message ends where its top-level object closes. Rather
//! than re-parsing the whole buffer after every read (quadratic in the message size, which a peer
//! trickling bytes could exploit), a small scanner tracks string state and nesting depth, so each
//! byte is looked at once; the complete object is then parsed by `serde_json`. Syntax errors
//! inside an object are therefore reported when it closes, not at the first bad byte.
//!
//! The scanner only looks at the ASCII bytes `" \ { } [ ]`, which never occur inside a UTF-8
//! multi-byte sequence, so it is correct for any UTF-8 input.

/// Why the stream cannot be framed any further.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// A message starts with something other than `{` (every JSON-RPC message is an object).
    NotAnObject,
    /// The current message has grown past the size limit without closing.
    TooLarge,
}

/// Incremental splitter; feed bytes with [`Framer::push`], take objects with [`Framer::next_frame`].
#[derive(Debug)]
pub(crate) struct Framer {
    buf: Vec<u8>,
    /// Bytes of `buf` before this offset have been scanned.
    pos: usize,
    /// Whether `buf[0]` is the `{` of a message in progress.
    started: bool,
    depth: usize,
    in_string: bool,
    escaped: bool,
    max: usize,
}

impl Framer {
    /// A framer that refuses messages longer than `max` bytes.
    pub(crate) fn new(max: usize) -> Self {
        Framer {
            buf: Vec::new(),
            pos: 0,
            started: false,
            depth: 0,
            in_string: false,
            escaped: false,
            max,
        }
    }

    pub(crate) fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Bytes held: the message in progress and what follows it.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Whether a message has begun but not ended (what an EOF now would cut short).
    pub(crate) fn in_message(&self) -> bool {
        self.started
    }

    /// The next complete top-level object, `Ok(None)` if more bytes are needed.
    pub(crate) fn next_frame(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        if !self.started {
            // Whitespace between messages is allowed and dropped.
            let skip = self
                .buf
                .iter()
                .position(|b| !b.is_ascii_whitespace())
                .unwrap_or(self.buf.len());
            self.buf.drain(..skip);
            match self.buf.first() {
                None => return Ok(None),
                Some(b'{') => {
                    self.started = true;
                    self.depth = 1;
                    self.pos = 1;
                }
                Some(_) => return Err(FrameError::NotAnObject),
            }
        }
        while self.pos < self.buf.len() {
            if self.pos >= self.max {
                return Err(FrameError::TooLarge);
            }
            let b = self.buf[self.pos];
            self.pos += 1;
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    // Mismatched brackets still close a frame; serde_json rejects it later.
                    self.depth -= 1;
                    if self.depth == 0 {
                        let frame: Vec<u8> = self.buf.drain(..self.pos).collect();
                        self.pos = 0;
                        self.started = false;
                        return Ok(Some(frame));
                    }
                }
                _ => {}
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames_of(chunks: &[&[u8]], max: usize) -> Result<Vec<Vec<u8>>, FrameError> {
        let mut f = Framer::new(max);
        let mut out = Vec::new();
        for c in chunks {
            f.push(c);
            while let Some(frame) = f.next_frame()? {
                out.push(frame);
            }
        }
        Ok(out)
    }

    const TWO: &[u8] = br#"{"id":0,"method":"a{[","params":["}\"]",{"x":[1]}]}  {"id":1}"#;

    #[test]
    fn splits_back_to_back_objects_with_tricky_strings() {
        let frames = frames_of(&[TWO], 1 << 20).unwrap();
        assert_eq!(
            frames,
            vec![
                br#"{"id":0,"method":"a{[","params":["}\"]",{"x":[1]}]}"#.to_vec(),
                br#"{"id":1}"#.to_vec()
            ]
        );
    }

    #[test]
    fn same_frames_whatever_the_split_point() {
        let whole = frames_of(&[TWO], 1 << 20).unwrap();
        for cut in 0..=TWO.len() {
            let (a, b) = TWO.split_at(cut);
            assert_eq!(frames_of(&[a, b], 1 << 20).unwrap(), whole, "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = TWO.chunks(1).collect();
        assert_eq!(frames_of(&bytes, 1 << 20).unwrap(), whole);
    }

    #[test]
    fn escaped_backslash_before_quote_ends_the_string() {
        let frames = frames_of(&[br#"{"a":"x\\"}{"b":1}"#], 100).unwrap();
        assert_eq!(
            frames,
            vec![br#"{"a":"x\\"}"#.to_vec(), br#"{"b":1}"#.to_vec()]
        );
    }

    #[test]
    fn non_object_is_refused() {
        assert_eq!(frames_of(&[b"  [1,2]"], 100), Err(FrameError::NotAnObject));
        assert_eq!(frames_of(&[b"\"s\""], 100), Err(FrameError::NotAnObject));
        assert_eq!(
            frames_of(&[b"{}garbage"], 100),
            Err(FrameError::NotAnObject)
        );
    }

    #[test]
    fn size_limit_applies_per_message() {
        // Exactly at the limit is fine, one byte more is not, complete or not.
        assert_eq!(frames_of(&[b"{\"a\":1}"], 7).unwrap().len(), 1);
        assert_eq!(frames_of(&[b"{\"a\":12}"], 7), Err(FrameError::TooLarge));
        assert_eq!(
            frames_of(&[b"{\"a\":\"12345"], 7),
            Err(FrameError::TooLarge)
        );
        // Several messages that each fit may together exceed the limit.
        assert_eq!(frames_of(&[b"{\"a\":1}{\"b\":2}{}"], 7).unwrap().len(), 3);
    }

    #[test]
    fn partial_message_is_reported_in_progress() {
        let mut f = Framer::new(100);
        f.push(b"  ");
        assert_eq!(f.next_frame(), Ok(None));
        assert!(!f.in_message());
        f.push(b"{\"id\":");
        assert_eq!(f.next_frame(), Ok(None));
        assert!(f.in_message());
        f.push(b"0}");
        assert_eq!(f.next_frame(), Ok(Some(b"{\"id\":0}".to_vec())));
        assert!(!f.in_message());
    }

    #[test]
    fn only_what_follows_a_frame_stays_buffered() {
        let mut f = Framer::new(100);
        f.push(b"  {\"id\":0} {\"id");
        assert_eq!(f.next_frame(), Ok(Some(b"{\"id\":0}".to_vec())));
        assert_eq!(f.buffered(), 5);
        assert_eq!(f.next_frame(), Ok(None));
        assert_eq!(f.buffered(), 4, "whitespace between messages is dropped");
    }
}
