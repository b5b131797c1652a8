//! What a report records of how it was made, so that its figures can be told apart and
//! made again: the machine (CPU model, logical and available CPUs, TSC frequency, kernel), the
//! date in UTC and the command line as a shell would take it back.

use std::path::Path;

/// The machine the report was made on.
#[derive(serde::Serialize)]
pub(super) struct Machine {
    pub(super) cpu: String,
    pub(super) logical_cpus: usize,
    pub(super) available_cpus: usize,
    pub(super) tsc_hz: u64,
    pub(super) kernel: String,
}

pub(super) fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .and_then(|r| r.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let logical_cpus = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    Machine {
        cpu,
        logical_cpus,
        available_cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        tsc_hz: datapath::tsc::hz(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default(),
    }
}

/// `secs` since the Unix epoch as a UTC date and time (proleptic Gregorian calendar).
pub(super) fn utc_date(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let t = secs % 86_400;
    // Days since 0000-03-01, counted in 400-year eras of 146097 days; March-based years put
    // the leap day last.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        t / 3600,
        t % 3600 / 60,
        t % 60
    )
}

/// The command line as a shell would take it back.
pub(super) fn command_line() -> String {
    std::env::args()
        .enumerate()
        .map(|(i, a)| {
            let a = if i == 0 {
                Path::new(&a)
                    .file_name()
                    .map_or(a.clone(), |f| f.to_string_lossy().into_owned())
            } else {
                a
            };
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.,/=:+@".contains(c));
            if plain {
                a
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc() {
        assert_eq!(utc_date(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_date(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc_date(1_700_000_000), "2023-11-14 22:13:20 UTC");
    }
}
