//! Invariant checks of the `ofctl_flow` fuzz target, shared with the crash-regression test
//! (`crates/ofproto/tests/fuzz_regressions.rs` path-imports this file), so that a committed
//! input is replayed through exactly the checks that found it.
//!
//! The input is text in the `ovs-ofctl` flow syntax (what `add-flow`, `mod-flows` and
//! `del-flows` take). Parsing normalizes to the form `dump-flows` prints, so:
//! - an `add-flow` flow that parses prints (`dump-flows --no-stats`, ports as numbers) to text
//!   that parses back to the same flow and prints the same;
//! - a `mod-flows`/`del-flows` flow that parses prints its match and actions to text that
//!   parses back (as `add-flow` text) to the same match and actions.

use ofproto::syntax::{FlowKind, NoPortNames, parse_flow};

/// Runs every check on `data` (when UTF-8).
pub fn check_ofctl_flow(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };

    if let Ok(f) = parse_flow(text, FlowKind::Add, &NoPortNames) {
        let printed = f.to_string();
        let g = parse_flow(&printed, FlowKind::Add, &NoPortNames)
            .unwrap_or_else(|e| panic!("printed flow does not parse: {e}\n{text:?}\n{printed}"));
        assert_eq!(g.to_string(), printed, "flow reprint differs\n{text:?}");
        assert_eq!(
            g, f,
            "printed flow parses to another flow\n{text:?}\n{printed}"
        );
    }

    if let Ok(f) = parse_flow(text, FlowKind::ModOrDel, &NoPortNames)
        && f.has_actions
    {
        let printed = f.format_match_actions(&NoPortNames);
        let g = parse_flow(&printed, FlowKind::Add, &NoPortNames).unwrap_or_else(|e| {
            panic!("printed mod-flows match does not parse: {e}\n{text:?}\n{printed}")
        });
        assert_eq!(
            (&g.match_, &g.actions),
            (&f.match_, &f.actions),
            "printed mod-flows flow parses to another one\n{text:?}\n{printed}"
        );
    }
}
