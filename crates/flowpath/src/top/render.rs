//! The screen of `flowpath top`, laid out from [`Rates`] for a terminal of a given size: a
//! header line (uptime, PMD threads, megaflows, total rx/tx Mpps), a row per PMD thread (core,
//! busy share, rx rate, cycles per packet split by stage as `dpif-netdev/pmd-stage-show`
//! splits them, and the shares of lookups served by the EMC tier, the megaflow classifier and
//! upcalls), a row per port (rx/tx packets and Mbit/s, drops and errors per second), the
//! busiest first, and the datapath's drops per second by reason.
//!
//! Every line is cut to the width and the whole to the height: when rows do not fit, PMD
//! threads keep at least one row, ports at least three, and the last row of a cut list says
//! how many were left out. Rendering is a pure function of its inputs, so it is tested on
//! fixed readings.

use std::fmt::Write as _;

use super::rates::{PmdRates, PortRates, Rates};

/// Lines of drops at most.
const MAX_DROP_LINES: usize = 2;
/// Port rows kept (when there are that many ports) before PMD rows take the space.
const MIN_PORT_ROWS: usize = 3;

/// The screen for `r` in a terminal `width` columns wide and `height` lines high; `None` for
/// the height shows every row (output that is not a terminal).
pub fn render(r: &Rates, width: usize, height: Option<usize>) -> Vec<String> {
    let drops = drop_lines(&r.drops, width);
    // Title, blank, PMD heading, blank, port heading, blank: the lines that are always there.
    let fixed = 6 + drops.len();
    let (pmd_rows, port_rows) = match height {
        None => (r.pmds.len(), r.ports.len()),
        Some(h) => {
            let rows = h.saturating_sub(fixed);
            let ports_min = r.ports.len().min(MIN_PORT_ROWS);
            let pmd_rows = r.pmds.len().min(rows.saturating_sub(ports_min)).max(1);
            (pmd_rows, rows.saturating_sub(pmd_rows))
        }
    };
    let mut lines = vec![title(r), String::new(), pmd_heading(&r.stages)];
    lines.extend(cut_list(&r.pmds, pmd_rows, "PMD threads", pmd_row));
    lines.push(String::new());
    lines.push(format!(
        "{:<20} {:>9} {:>9} {:>10} {:>10} {:>8} {:>6}",
        "port", "rx pps", "tx pps", "rx Mbit/s", "tx Mbit/s", "drop/s", "err/s"
    ));
    lines.extend(cut_list(&r.ports, port_rows, "ports", port_row));
    lines.push(String::new());
    lines.extend(drops);
    if let Some(h) = height {
        lines.truncate(h);
    }
    for l in &mut lines {
        cut(l, width);
    }
    lines
}

/// `rows` lines for `items`: all of them when they fit, else the first `rows - 1` and a line
/// saying how many more there are.
fn cut_list<T>(items: &[T], rows: usize, what: &str, row: fn(&T) -> String) -> Vec<String> {
    if items.len() <= rows {
        return items.iter().map(row).collect();
    }
    let shown = rows.saturating_sub(1);
    let mut out: Vec<String> = items[..shown].iter().map(row).collect();
    out.push(format!("... {} more {what}", items.len() - shown));
    out
}

fn title(r: &Rates) -> String {
    format!(
        "flowpath top  up {}  {} PMD{}  {} megaflows  rx {:.2} Mpps  tx {:.2} Mpps",
        duration(r.uptime_secs),
        r.pmds.len(),
        if r.pmds.len() == 1 { "" } else { "s" },
        r.megaflows,
        r.rx_pps / 1e6,
        r.tx_pps / 1e6
    )
}

fn pmd_heading(stages: &[String]) -> String {
    let mut s = format!(
        "{:>4} {:>5} {:>7} {:>6}",
        "core", "busy%", "rx pps", "cyc/pk"
    );
    for st in stages {
        let _ = write!(s, " {:>4}", stage_abbrev(st));
    }
    let _ = write!(s, " {:>5} {:>5} {:>5}", "emc%", "mf%", "upc%");
    s
}

fn pmd_row(p: &PmdRates) -> String {
    let core = p.core_id.map_or("-".to_owned(), |c| c.to_string());
    let mut s = format!(
        "{core:>4} {:>5.1} {:>7} {:>6}",
        p.busy_pct,
        si(p.rx_pps),
        si(p.cpp)
    );
    for &c in &p.stage_cpp {
        let _ = write!(s, " {:>4}", si(c));
    }
    let _ = write!(
        s,
        " {:>5.1} {:>5.1} {:>5.1}",
        p.emc_pct, p.megaflow_pct, p.upcall_pct
    );
    s
}

fn port_row(p: &PortRates) -> String {
    let mut name = p.name.clone();
    if !p.link_up {
        name.push_str(" (down)");
    }
    if name.chars().count() > 20 {
        cut(&mut name, 19);
        name.push('~');
    }
    format!(
        "{name:<20} {:>9} {:>9} {:>10.1} {:>10.1} {:>8} {:>6}",
        si(p.rx_pps),
        si(p.tx_pps),
        p.rx_mbps,
        p.tx_mbps,
        si(p.drops_ps),
        si(p.errors_ps)
    )
}

/// `drops/s: REASON RATE  REASON RATE ...` wrapped over at most [`MAX_DROP_LINES`] lines of
/// `width`, the reasons that do not fit counted at the end.
fn drop_lines(drops: &[(String, f64)], width: usize) -> Vec<String> {
    let mut lines = vec![String::from("drops/s:")];
    if drops.is_empty() {
        lines[0].push_str(" none");
        return lines;
    }
    for (i, (reason, rate)) in drops.iter().enumerate() {
        let item = format!("  {reason} {}", si(*rate));
        let last = lines.last_mut().expect("one line at least");
        if last.len() + item.len() <= width {
            last.push_str(&item);
            continue;
        }
        if lines.len() < MAX_DROP_LINES {
            lines.push(format!("        {item}"));
            continue;
        }
        // No room: the last line ends with how many reasons are not shown.
        let more = format!("  +{} more", drops.len() - i);
        let last = lines.last_mut().expect("one line at least");
        while last.len() + more.len() > width && last.contains("  ") {
            let at = last.rfind("  ").expect("checked");
            last.truncate(at);
        }
        last.push_str(&more);
        break;
    }
    lines
}

/// The short heading of a stage of `pmd-stage-show`.
fn stage_abbrev(name: &str) -> &str {
    match name {
        "extract" => "ext",
        "megaflow" => "mf",
        "upcall" => "upc",
        "actions" => "act",
        n => n.get(..4).unwrap_or(n),
    }
}

/// `x` in at most 5 characters: units up to 999, then k, M, G, T, P, E with one decimal
/// below 10.
fn si(x: f64) -> String {
    const UNITS: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    let (mut x, mut unit) = (x.max(0.0), 0);
    while x >= 999.5 && unit < UNITS.len() - 1 {
        x /= 1e3;
        unit += 1;
    }
    match (unit, x) {
        (0, x) => format!("{x:.0}"),
        (u, x) if x < 9.95 => format!("{x:.1}{}", UNITS[u]),
        (u, x) => format!("{x:.0}{}", UNITS[u]),
    }
}

/// An uptime as `1d02h03m`, `2h03m04s`, `3m04s` or `12s`.
fn duration(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m{s:02}s"),
        (0, _, _) => format!("{h}h{m:02}m{s:02}s"),
        _ => format!("{d}d{h:02}h{m:02}m"),
    }
}

/// Cuts `line` to `width` characters.
fn cut(line: &mut String, width: usize) {
    if let Some((at, _)) = line.char_indices().nth(width) {
        line.truncate(at);
    }
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
