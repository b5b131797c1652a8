//! The `ofproto/trace` text (OVS's `ofproto-dpif-trace.c`): a tree of lines as translation
//! goes, rendered with OVS's indentation.

use super::*;

/// Kinds of `ofproto/trace` lines (OVS's `oftrace_node_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NodeKind {
    Bridge,
    Table,
    /// Thawing a frozen state (OVS's `OFT_THAW`): printed like a table line.
    Thaw,
    Action,
    Detail,
    Warn,
    Error,
}

pub(super) struct TraceNode {
    pub(super) kind: NodeKind,
    pub(super) text: String,
    pub(super) subs: Vec<usize>,
}

/// The trace as OVS builds it: a tree of lines. A resubmitted table is a sibling of the
/// resubmit that led to it, so it nests only when more lines follow it.
pub(super) struct Trace {
    pub(super) nodes: Vec<TraceNode>,
    /// The node new lines go under.
    pub(super) cur: usize,
}

impl Trace {
    pub(super) fn new() -> Trace {
        Trace {
            nodes: vec![TraceNode {
                kind: NodeKind::Table,
                text: String::new(),
                subs: Vec::new(),
            }],
            cur: 0,
        }
    }

    pub(super) fn add(&mut self, kind: NodeKind, text: String) -> usize {
        let id = self.nodes.len();
        self.nodes.push(TraceNode {
            kind,
            text,
            subs: Vec::new(),
        });
        self.nodes[self.cur].subs.push(id);
        id
    }

    pub(super) fn render(&self, out: &mut String) {
        self.print(&self.nodes[0].subs, 0, out);
    }

    /// OVS's layout: a line is indented `(level + more) * 4` spaces, where `more` is set for
    /// any line that is not the last of its list and for every action or detail line, and the
    /// lines under it go at `level + 2 * more`.
    pub(super) fn print(&self, list: &[usize], level: usize, out: &mut String) {
        for (k, &id) in list.iter().enumerate() {
            let n = &self.nodes[id];
            if n.kind == NodeKind::Bridge {
                out.push('\n');
            }
            let more = usize::from(
                k + 1 < list.len()
                    || matches!(
                        n.kind,
                        NodeKind::Action | NodeKind::Detail | NodeKind::Warn | NodeKind::Error
                    ),
            );
            let ind = " ".repeat((level + more) * 4);
            match n.kind {
                NodeKind::Detail => {
                    let _ = writeln!(out, "{ind} -> {}", n.text);
                }
                NodeKind::Warn => {
                    let _ = writeln!(out, "{ind} >> {}", n.text);
                }
                NodeKind::Error => {
                    let _ = writeln!(out, "{ind} >>>> {} <<<<", n.text);
                }
                NodeKind::Bridge => {
                    let _ = writeln!(out, "{ind}{}", n.text);
                    let _ = writeln!(out, "{ind}{}", "-".repeat(n.text.len()));
                }
                NodeKind::Table | NodeKind::Thaw | NodeKind::Action => {
                    let _ = writeln!(out, "{ind}{}", n.text);
                }
            }
            self.print(&n.subs, level + 2 * more, out);
        }
    }
}

/// `format_match` prints `priority=N,` first; the trace shows the match alone.
pub(super) fn strip_priority(s: &str) -> String {
    let mut parts: Vec<&str> = s.split(',').collect();
    parts.retain(|p| !p.starts_with("priority="));
    parts.join(",")
}
