//! Replays the committed inputs of the `of_msg` fuzz target (`tests/data/fuzz/of_msg/*`: the
//! inputs that made it fail once, and inputs that reach deep paths) through the same checks
//! the fuzz target runs, which live in `fuzz/src/of_msg.rs`, path-imported here so that both
//! use one copy. Then the same checks over every message of the corpora: OVS's own test
//! vectors, what `ovs-ofctl` sent, and the OVN conversation.

#[allow(dead_code)]
#[path = "../../../fuzz/src/of_msg.rs"]
mod of_msg;

use std::path::PathBuf;

fn unhex(h: &str) -> Vec<u8> {
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
        .collect()
}

/// Runs the checks on `data`, naming it when they fail.
fn replay(name: &str, data: &[u8]) {
    if let Err(e) = std::panic::catch_unwind(|| of_msg::check_of_msg(data)) {
        let msg = e
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| e.downcast_ref::<&str>().copied())
            .unwrap_or("");
        panic!("of_msg/{name}: {msg}");
    }
}

#[test]
fn of_msg_inputs() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz/of_msg");
    let mut inputs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "no inputs in {}", dir.display());
    for p in inputs {
        replay(
            &p.file_name().unwrap().to_string_lossy(),
            &std::fs::read(&p).unwrap(),
        );
    }
}

/// Every message of the corpora, as a stream of one read 12 KiB at a time (first byte 0x7f;
/// a first byte of 0 would read it byte by byte, the slowest way), through the checks.
#[test]
fn corpus_messages() {
    let files = [
        include_str!("../../../testdata/openflow/ofp-print-at.txt"),
        include_str!("../../../testdata/openflow/ofctl-requests.txt"),
        include_str!("../../../testdata/openflow/ovn/conversation.txt"),
        include_str!("../../../testdata/openflow/flow_mods.txt"),
    ];
    let mut n = 0;
    for text in files {
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            // the hex field: the longest of the line's fields that is all hex digits
            let Some(h) = l
                .split('\t')
                .filter(|f| f.len() >= 16 && f.bytes().all(|b| b.is_ascii_hexdigit()))
                .max_by_key(|f| f.len())
            else {
                continue;
            };
            let mut data = vec![0x7f];
            data.extend(unhex(h));
            replay(&format!("corpus line {l:.40}"), &data);
            n += 1;
        }
    }
    assert!(n > 1000, "{n}");
}
