//! Invariant checks of the `stream_file` fuzz target, shared with the crash-regression test
//! (`crates/trafgen/tests/fuzz_regressions.rs` path-imports this file), so that a committed
//! input is replayed through exactly the checks that found it.
//!
//! The input is a traffic generator stream file (TOML: ports, streams, layers, variation), as
//! `flowpath gen` reads it; `pcap = "..."` templates name files that do not exist. What
//! parses is compiled, and then:
//! - every error names a line of the file;
//! - every stream writes its packets within [`FrameSet::max_len`], the same packet for `k`
//!   and `k + period` (the period covers every flow and frame size), the stamp last when the
//!   stream is stamped;
//! - a stream reversed (as `direction = "bi"` reverses it) and reversed again writes the same
//!   packets.

use std::path::Path;

use trafgen::build::FrameSet;
use trafgen::stamp::{STAMP_LEN, Stamp};
use trafgen::stream;

/// Runs every check on `data` (when UTF-8).
pub fn check_stream_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match stream::parse(text, Path::new("/nonexistent/fuzz")) {
        Ok(file) => {
            for s in &file.streams {
                check_frames(&s.frames);
                if let Ok(r) = s.frames.reversed()
                    && let Ok(rr) = r.reversed()
                {
                    let stamp = Stamp::default();
                    for k in [0, 1, s.frames.flows().saturating_sub(1)] {
                        assert_eq!(
                            rr.frame(k, &stamp),
                            s.frames.frame(k, &stamp),
                            "frame {k} reversed twice differs"
                        );
                    }
                }
            }
        }
        Err(errs) => {
            let lines = text.lines().count() + 1;
            for e in errs {
                assert!((1..=lines).contains(&e.line), "{e} (of {lines} lines)");
            }
        }
    }
    for r in text.lines() {
        if let Ok(stream::Rate::Pps(x) | stream::Rate::L1Bps(x)) = stream::parse_rate(r, Some(1e10))
        {
            assert!(x.is_finite() && x > 0.0, "rate {r:?}: {x}");
        }
    }
}

/// The packets a compiled stream writes.
fn check_frames(f: &FrameSet) {
    let stamp = Stamp {
        stream: 7,
        seq: 0x1234_5678,
        tx_ns: 0x0102_0304_0506,
    };
    let period = f.period();
    for k in [
        0,
        1,
        2,
        f.flows().saturating_sub(1),
        period.saturating_sub(1),
    ] {
        let a = f.frame(k, &stamp);
        assert!(
            !a.is_empty() && a.len() <= f.max_len(),
            "frame {k}: {} bytes",
            a.len()
        );
        if let Some(k2) = k.checked_add(period) {
            assert_eq!(f.frame(k2, &stamp), a, "frame {k} and {k2} differ");
        }
        if f.stamped() {
            assert_eq!(
                a[a.len() - STAMP_LEN..],
                stamp.to_bytes(),
                "frame {k}: no stamp at its end"
            );
        }
    }
}
