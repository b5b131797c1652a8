//! Invariant checks of the `config_toml` fuzz target, shared with the crash-regression test
//! (`crates/flowpath/tests/fuzz_regressions.rs` path-imports this file), so that a committed
//! input is replayed through exactly the checks that found it.
//!
//! The input is the text of a configuration file (`flowpath run CONFIG`, `flowpath check`),
//! which an operator or a tool writes. Parsing and checking it must:
//! - give the same verdict twice (no state kept between parses);
//! - name, for every error with a line, a line of the text (or the one after its end, where
//!   the TOML parser reports an unexpected end of input);
//! - for a configuration it accepts, number the ports without panicking, each bridge's
//!   OpenFlow port numbers distinct and none 0 or OFPP_MAX and above.

use flowpath::config::{ConfigError, parse};

/// OpenFlow 1.0's first reserved port number; `ofport` must stay below it.
const OFPP_MAX: u32 = 0xff00;

/// Runs every check on `data` (when UTF-8).
pub fn check_config_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let first = parse(text);
    let second = parse(text);
    let lines = text.lines().count().max(1) + 1;
    match (&first, &second) {
        (Err(a), Err(b)) => {
            assert_eq!(
                messages(a),
                messages(b),
                "errors differ between parses\n{text:?}"
            );
            for e in a {
                assert!(
                    !e.message.is_empty(),
                    "an error without a message\n{text:?}"
                );
                if let Some(l) = e.line {
                    assert!(
                        (1..=lines).contains(&l),
                        "{e} is past the text's {lines} lines\n{text:?}"
                    );
                }
            }
        }
        (Ok(cfg), Ok(_)) => {
            let mut seen = std::collections::HashSet::new();
            for p in cfg.ports() {
                assert!(
                    (p.ofport != 0 && p.ofport < OFPP_MAX) || p.port.kind == "internal",
                    "port {} got OpenFlow port {}\n{text:?}",
                    p.port.name,
                    p.ofport
                );
                assert!(
                    seen.insert((p.bridge.name.as_str(), p.ofport)),
                    "bridge {} has OpenFlow port {} twice\n{text:?}",
                    p.bridge.name,
                    p.ofport
                );
            }
        }
        _ => panic!("one parse accepted what the other refused\n{text:?}"),
    }
}

fn messages(errors: &[ConfigError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}
