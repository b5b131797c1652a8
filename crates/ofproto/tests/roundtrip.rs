//! Round trips and robustness of the flow syntax.
//!
//! - parse(print(x)) == x for every flow of the oracle corpus, and printing is stable;
//! - arbitrary strings and mutations of corpus lines never panic, and whatever parses prints
//!   to a line that parses back to the same flow.

use ofproto::syntax::{FlowKind, FlowSpec, NoPortNames, parse_flow, parse_flows_file};
use proptest::prelude::*;

fn corpus() -> Vec<String> {
    let text = include_str!("data/flows.txt");
    text.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

fn bad_corpus() -> Vec<String> {
    include_str!("data/bad_flows.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split('\t').next().unwrap_or("").to_string())
        .collect()
}

fn parse(s: &str, kind: FlowKind) -> Result<FlowSpec, ofproto::syntax::SyntaxError> {
    parse_flow(s, kind, &NoPortNames)
}

/// parse(print(x)) == x and print(parse(print(x))) == print(x).
fn assert_round_trip(x: &FlowSpec, kind: FlowKind) -> Result<(), String> {
    let printed = x.to_string();
    let y = parse(&printed, kind).map_err(|e| format!("{printed:?} does not parse: {e}"))?;
    if &y != x {
        return Err(format!(
            "{printed:?} parses to a different flow:\n{x:?}\n{y:?}"
        ));
    }
    let again = y.to_string();
    if again != printed {
        return Err(format!(
            "printing is not stable: {printed:?} then {again:?}"
        ));
    }
    Ok(())
}

#[test]
fn corpus_round_trips() {
    let mut failures = Vec::new();
    for line in corpus() {
        let x = parse(&line, FlowKind::Add).expect("corpus flow parses");
        if let Err(e) = assert_round_trip(&x, FlowKind::Add) {
            failures.push(format!("{line}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn flows_file_reports_line_numbers() {
    let text = "# a comment\n\nip,actions=drop # trailing comment\nnw_sr=1,actions=drop\n   \n\
                tcp,actions=outptu\nactions=NORMAL\n";
    let errors = parse_flows_file(text, &NoPortNames).unwrap_err();
    let lines: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        lines,
        [
            "line 4: unknown field 'nw_sr'",
            "line 6: unknown action 'outptu'"
        ]
    );
    let ok = parse_flows_file(
        "ip,actions=drop\n#x\n\nactions=NORMAL # all\n",
        &NoPortNames,
    )
    .unwrap();
    assert_eq!(ok.len(), 2);
    assert_eq!(ok[1].to_string(), "actions=NORMAL");
}

/// A random edit of a corpus line: insert, delete or replace a character, or splice in a
/// token from another line.
fn mutate(line: &str, edits: &[(usize, u8, char)], donor: &str) -> String {
    let mut chars: Vec<char> = line.chars().collect();
    for &(pos, op, c) in edits {
        let pos = if chars.is_empty() {
            0
        } else {
            pos % (chars.len() + 1)
        };
        match op % 4 {
            0 => chars.insert(pos, c),
            1 if pos < chars.len() => {
                chars.remove(pos);
            }
            2 if pos < chars.len() => chars[pos] = c,
            _ => {
                let token: Vec<char> = donor
                    .split([',', ' '])
                    .nth(pos % 4)
                    .unwrap_or("")
                    .chars()
                    .collect();
                for (i, t) in token.into_iter().enumerate() {
                    chars.insert((pos + i).min(chars.len()), t);
                }
            }
        }
    }
    chars.into_iter().collect()
}

fn syntax_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => prop::sample::select(vec![
            ',', '=', ':', '(', ')', '[', ']', '.', '/', '-', '>', '+', '|', ' ', '0', '1', 'x',
            'f', '#', '"', '\\', '*',
        ]),
        1 => any::<char>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,120}") {
        let _ = parse(&s, FlowKind::Add);
        let _ = parse(&s, FlowKind::ModOrDel);
        let _ = parse_flows_file(&s, &NoPortNames);
    }

    #[test]
    fn syntax_soup_never_panics(chars in prop::collection::vec(syntax_char(), 0..80)) {
        let s: String = chars.into_iter().collect();
        let _ = parse(&s, FlowKind::Add);
        let _ = parse(&format!("actions={s}"), FlowKind::Add);
        let _ = parse(&format!("ip,actions=ct({s})"), FlowKind::Add);
        let _ = parse(&format!("{s},actions=drop"), FlowKind::ModOrDel);
    }

    #[test]
    fn mutated_corpus_never_panics_and_round_trips(
        i in 0usize..1000,
        j in 0usize..1000,
        edits in prop::collection::vec((0usize..200, any::<u8>(), syntax_char()), 1..4),
    ) {
        let good = corpus();
        let bad = bad_corpus();
        let all: Vec<&String> = good.iter().chain(bad.iter()).collect();
        let line = all[i % all.len()];
        let donor = all[j % all.len()];
        let m = mutate(line, &edits, donor);
        // Printing is for installed flows, so the round trip is checked for additions;
        // mod/del parsing only must not panic.
        let _ = parse(&m, FlowKind::ModOrDel);
        if let Ok(x) = parse(&m, FlowKind::Add) {
            let r = assert_round_trip(&x, FlowKind::Add);
            prop_assert!(r.is_ok(), "{:?}: {:?}", m, r);
        }
    }
}
