//! The exposition formats a scraper reads: Prometheus's text format 0.0.4 and OpenMetrics 1.0
//! text (`application/openmetrics-text`). A metric family is written once, with its `# HELP`
//! and `# TYPE` lines and then every sample, whatever order the collectors add samples in:
//! [`Exposition`] gathers each family's samples and renders them together, as both formats
//! require.
//!
//! Families are named by their sample name (`flowpath_pmd_rx_packets_total`). The two formats
//! differ for counters: the text format's `# TYPE` names the sample (`..._total counter`),
//! OpenMetrics names the family without `_total` and ends the exposition with `# EOF`.

use std::fmt::Write;

/// Which text format to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4.
    Prometheus,
    /// OpenMetrics 1.0 text.
    OpenMetrics,
}

impl Format {
    /// The format a scraper asks for in its `Accept` header: OpenMetrics when it names
    /// `application/openmetrics-text`, the text format otherwise.
    pub fn from_accept(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    /// The response's `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (reset when the switch restarts or its statistics are cleared); the name
    /// ends in `_total`.
    Counter,
    /// Goes up and down.
    Gauge,
}

/// A sample's value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    Int(u64),
    Float(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Int(v)
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Value {
        Value::Int(u64::from(v))
    }
}

impl From<usize> for Value {
    fn from(v: usize) -> Value {
        Value::Int(v as u64)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Int(u64::from(v))
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

/// One family being gathered.
struct Family {
    name: &'static str,
    kind: Kind,
    help: &'static str,
    /// Its sample lines, rendered.
    samples: String,
}

/// A whole exposition being gathered: families in the order they were first named.
pub struct Exposition {
    format: Format,
    families: Vec<Family>,
}

impl Exposition {
    pub fn new(format: Format) -> Exposition {
        Exposition {
            format,
            families: Vec::new(),
        }
    }

    /// Adds a sample of family `name` (of `kind`, described by `help` the first time it is
    /// named) with `labels`, in the family's place however many families came between.
    pub fn sample(
        &mut self,
        name: &'static str,
        kind: Kind,
        help: &'static str,
        labels: &[(&str, &str)],
        value: impl Into<Value>,
    ) {
        debug_assert!(
            kind != Kind::Counter || name.ends_with("_total"),
            "counter {name} must end in _total"
        );
        let i = match self.families.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.families.push(Family {
                    name,
                    kind,
                    help,
                    samples: String::new(),
                });
                self.families.len() - 1
            }
        };
        let out = &mut self.families[i].samples;
        out.push_str(name);
        if !labels.is_empty() {
            out.push('{');
            for (n, (k, v)) in labels.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                out.push_str(k);
                out.push_str("=\"");
                escape_label_value(out, v);
                out.push('"');
            }
            out.push('}');
        }
        out.push(' ');
        write_value(out, value.into());
        out.push('\n');
    }

    /// Declares family `name` without samples yet, so that it is listed (with its HELP and
    /// TYPE) even when nothing is there to count, e.g. no conntrack zone in use.
    pub fn declare(&mut self, name: &'static str, kind: Kind, help: &'static str) {
        if !self.families.iter().any(|f| f.name == name) {
            self.families.push(Family {
                name,
                kind,
                help,
                samples: String::new(),
            });
        }
    }

    /// The exposition's text.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(
            self.families
                .iter()
                .map(|f| f.samples.len() + f.help.len() + 2 * f.name.len() + 32)
                .sum::<usize>()
                + 8,
        );
        for f in &self.families {
            let family = match (self.format, f.kind) {
                (Format::OpenMetrics, Kind::Counter) => {
                    f.name.strip_suffix("_total").unwrap_or(f.name)
                }
                _ => f.name,
            };
            let kind = match f.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
            };
            out.push_str("# HELP ");
            out.push_str(family);
            out.push(' ');
            escape_help(&mut out, f.help);
            out.push('\n');
            let _ = writeln!(out, "# TYPE {family} {kind}");
            out.push_str(&f.samples);
        }
        if self.format == Format::OpenMetrics {
            out.push_str("# EOF\n");
        }
        out
    }
}

/// A label value in quotes: backslash, double quote and line feed escaped (both formats).
fn escape_label_value(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A HELP text: backslash and line feed escaped.
fn escape_help(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A value as both formats write numbers (`NaN`, `+Inf`, `-Inf` for the special ones).
fn write_value(out: &mut String, v: Value) {
    match v {
        Value::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Float(f) if f.is_nan() => out.push_str("NaN"),
        Value::Float(f) if f.is_infinite() => out.push_str(if f > 0.0 { "+Inf" } else { "-Inf" }),
        Value::Float(f) => {
            let _ = write!(out, "{f}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let mut e = Exposition::new(Format::Prometheus);
        e.sample(
            "flowpath_x",
            Kind::Gauge,
            "X.",
            &[("port", "a\"b\\c\nd"), ("queue", "0")],
            1u64,
        );
        assert_eq!(
            e.render(),
            "# HELP flowpath_x X.\n# TYPE flowpath_x gauge\n\
             flowpath_x{port=\"a\\\"b\\\\c\\nd\",queue=\"0\"} 1\n"
        );
    }

    #[test]
    fn help_and_type_once_per_family_with_its_samples_together() {
        let mut e = Exposition::new(Format::Prometheus);
        let c = |e: &mut Exposition, pmd: &str, v: u64| {
            e.sample(
                "flowpath_a_total",
                Kind::Counter,
                "A with a \\ and\na line.",
                &[("pmd", pmd)],
                v,
            )
        };
        c(&mut e, "1", 5);
        e.sample("flowpath_b", Kind::Gauge, "B.", &[], 0.5);
        c(&mut e, "2", 7);
        assert_eq!(
            e.render(),
            "# HELP flowpath_a_total A with a \\\\ and\\na line.\n\
             # TYPE flowpath_a_total counter\n\
             flowpath_a_total{pmd=\"1\"} 5\n\
             flowpath_a_total{pmd=\"2\"} 7\n\
             # HELP flowpath_b B.\n# TYPE flowpath_b gauge\nflowpath_b 0.5\n"
        );
        let text = e.render();
        assert_eq!(text.matches("# TYPE flowpath_a_total").count(), 1);
        assert_eq!(text.matches("# HELP flowpath_a_total").count(), 1);
    }

    #[test]
    fn openmetrics_names_counter_families_without_total_and_ends_with_eof() {
        let mut e = Exposition::new(Format::OpenMetrics);
        e.sample("flowpath_a_total", Kind::Counter, "A.", &[], 3u64);
        e.declare("flowpath_c", Kind::Gauge, "C.");
        assert_eq!(
            e.render(),
            "# HELP flowpath_a A.\n# TYPE flowpath_a counter\nflowpath_a_total 3\n\
             # HELP flowpath_c C.\n# TYPE flowpath_c gauge\n# EOF\n"
        );
    }

    #[test]
    fn special_values_and_the_accept_header() {
        let mut e = Exposition::new(Format::Prometheus);
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e21, 0.25] {
            e.sample("flowpath_v", Kind::Gauge, "V.", &[], v);
        }
        let t = e.render();
        let vals: Vec<&str> = t
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.rsplit(' ').next().unwrap())
            .collect();
        assert_eq!(
            vals,
            ["NaN", "+Inf", "-Inf", "1000000000000000000000", "0.25"]
        );
        assert_eq!(Format::from_accept(None), Format::Prometheus);
        assert_eq!(
            Format::from_accept(Some(
                "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
            )),
            Format::OpenMetrics
        );
        assert_eq!(
            Format::from_accept(Some("text/plain;version=0.0.4")),
            Format::Prometheus
        );
    }
}
