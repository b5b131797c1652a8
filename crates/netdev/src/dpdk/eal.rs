//! DPDK's Environment Abstraction Layer, started once per process from OVS's settings:
//! `dpdk-init` (`true`, or `try` to go on without DPDK when it fails), `dpdk-extra` (more EAL
//! arguments), `dpdk-socket-mem`, `dpdk-hugepage-dir` and `dpdk-lcore-mask`.
//!
//! With free hugepages (or a `dpdk-hugepage-dir`) DPDK runs on them, `--in-memory` as OVS
//! does, so nothing is left in `/var/run/dpdk` to clash with another DPDK process. Without,
//! it runs on ordinary memory (`--no-huge --no-shconf`, fixed at `dpdk-socket-mem` or 512 MB)
//! and says so: fine for virtual devices and tests, about twice the I/O cost per packet.
//! `--legacy-mem` in `dpdk-extra` keeps a shared configuration instead (neither `--in-memory`
//! nor `--no-shconf`, as OVS leaves out `--in-memory` then), for drivers that talk to other
//! DPDK processes such as `net_memif`.
//! `rte_eal_init` pins its calling thread to the main lcore and its own threads inherit the
//! caller's affinity: the caller is narrowed to the first core it may use while EAL starts
//! (so that EAL's threads stay off the PMD cores), and its affinity is put back afterwards.

use std::ffi::{CStr, CString};
use std::sync::OnceLock;

use super::{DpdkError, strerror};

/// `dpdk-init`: whether a failure to start DPDK stops the switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DpdkInit {
    /// `true`: start DPDK; failing is an error.
    True,
    /// `try`: start DPDK; on failure go on without it (DPDK ports then fail one by one).
    Try,
}

impl DpdkInit {
    /// Parses OVS's value: `true` or `try`; `None` for `false` or anything else (no DPDK).
    pub fn parse(v: &str) -> Option<DpdkInit> {
        match v {
            "true" => Some(DpdkInit::True),
            "try" => Some(DpdkInit::Try),
            _ => None,
        }
    }
}

/// The EAL settings, with OVS's names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EalOptions {
    /// `dpdk-extra`: more EAL arguments, split at whitespace.
    pub extra: Option<String>,
    /// `dpdk-socket-mem`: MB per NUMA socket (`1024,0`).
    pub socket_mem: Option<String>,
    /// `dpdk-hugepage-dir`: the hugetlbfs mount to use.
    pub hugepage_dir: Option<String>,
    /// `dpdk-lcore-mask`: the cores of DPDK's own threads (hex mask, `0x1`).
    pub lcore_mask: Option<String>,
}

/// The running environment.
#[derive(Debug)]
pub struct Eal {
    /// The arguments it was started with.
    pub args: Vec<String>,
    /// Whether it runs on hugepages (false: `--no-huge`).
    pub hugepages: bool,
    /// DPDK's version string (`DPDK 22.11.11`).
    pub version: String,
}

static EAL: OnceLock<Result<Eal, String>> = OnceLock::new();

impl Eal {
    /// Starts DPDK with `opts`, or returns the environment already started (EAL starts once
    /// per process: later options are ignored).
    pub fn init(opts: &EalOptions) -> Result<&'static Eal, DpdkError> {
        EAL.get_or_init(|| start(opts))
            .as_ref()
            .map_err(|e| DpdkError::Init(e.clone()))
    }

    /// The running environment, if [`Eal::init`] succeeded.
    pub fn get() -> Option<&'static Eal> {
        EAL.get().and_then(|r| r.as_ref().ok())
    }
}

/// Free 2 MB/1 GB pages the kernel has reserved, from `/proc/meminfo`.
fn free_hugepages() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("HugePages_Free:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The EAL arguments for `opts` (argv[0] first), and whether they use hugepages.
pub fn eal_args(opts: &EalOptions, free_hugepages: u64) -> Result<(Vec<String>, bool), DpdkError> {
    let mut a = vec!["flowpath".to_owned()];
    let extra: Vec<String> = opts
        .extra
        .as_deref()
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let has = |flag: &str| {
        extra
            .iter()
            .any(|e| e == flag || e.starts_with(&format!("{flag}=")))
    };
    if let Some(mask) = &opts.lcore_mask {
        let m = mask.trim_start_matches("0x");
        if m.is_empty() || u128::from_str_radix(m, 16).is_err() {
            return Err(DpdkError::Setting {
                key: "dpdk-lcore-mask",
                why: format!("{mask:?} is not a hexadecimal core mask"),
            });
        }
        a.push("-c".to_owned());
        a.push(format!("0x{m}"));
    } else if !(has("-l") || has("-c") || has("--lcores")) {
        // One lcore for EAL's main thread; PMD threads register themselves.
        a.push("-l".to_owned());
        a.push(main_core().to_string());
    }
    let hugepages = !has("--no-huge") && (opts.hugepage_dir.is_some() || free_hugepages > 0);
    // `--legacy-mem` asks for a shared configuration, as OVS reads it (it then leaves out
    // --in-memory): what drivers that talk to other DPDK processes need (net_memif).
    let shared = has("--legacy-mem");
    if hugepages {
        if let Some(d) = &opts.hugepage_dir {
            a.push(format!("--huge-dir={d}"));
        }
        if !has("--in-memory") && !shared {
            a.push("--in-memory".to_owned());
        }
        if let Some(m) = &opts.socket_mem {
            a.push(format!("--socket-mem={m}"));
        }
    } else {
        // --no-huge means legacy memory, reserved once at -m: the sum of socket-mem.
        let mb = match &opts.socket_mem {
            Some(m) => m
                .split(',')
                .map(|x| x.trim().parse::<u64>())
                .sum::<Result<u64, _>>()
                .map_err(|_| DpdkError::Setting {
                    key: "dpdk-socket-mem",
                    why: format!("{m:?} is not a list of megabytes"),
                })?,
            None => 512,
        };
        if !has("--no-huge") {
            a.push("--no-huge".to_owned());
        }
        if !has("--no-shconf") && !shared {
            a.push("--no-shconf".to_owned());
        }
        if !has("-m") {
            a.push("-m".to_owned());
            a.push(mb.max(64).to_string());
        }
    }
    if !has("--file-prefix") {
        a.push(format!("--file-prefix={}", own_prefix()));
    }
    if !has("--no-telemetry") && !has("--telemetry") {
        a.push("--no-telemetry".to_owned());
    }
    a.extend(extra);
    Ok((a, hugepages))
}

/// The first core this thread may run on: where EAL's main lcore goes by default.
fn main_core() -> usize {
    with_affinity(|set| {
        (0..libc::CPU_SETSIZE as usize).find(|&c| {
            // SAFETY: `c` is below CPU_SETSIZE, the size of the set.
            unsafe { libc::CPU_ISSET(c, set) }
        })
    })
    .flatten()
    .unwrap_or(0)
}

/// Calls `f` with this thread's CPU affinity; `None` if it cannot be read.
fn with_affinity<T>(f: impl FnOnce(&libc::cpu_set_t) -> T) -> Option<T> {
    // SAFETY: cpu_set_t is plain bits; all zero is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size given; 0 is this thread.
    let r = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
    (r == 0).then(|| f(&set))
}

fn start(opts: &EalOptions) -> Result<Eal, String> {
    let (args, hugepages) = eal_args(opts, free_hugepages()).map_err(|e| e.to_string())?;
    if !hugepages {
        crate::log::log(
            vlog::Level::Warn,
            "DPDK runs without hugepages (--no-huge): fine for virtual devices, about twice the \
             I/O cost per packet (reserve hugepages or set dpdk-hugepage-dir)",
        );
    }
    let cargs: Vec<CString> = args
        .iter()
        .map(|a| CString::new(a.as_str()).map_err(|_| format!("EAL argument {a:?} holds a NUL")))
        .collect::<Result<_, _>>()?;
    // EAL may permute argv: it gets its own array of pointers into `cargs`, which outlives it.
    let mut argv: Vec<*mut libc::c_char> = cargs.iter().map(|c| c.as_ptr().cast_mut()).collect();
    let saved = with_affinity(|s| *s);
    // EAL's own threads (interrupts, control) inherit the affinity of the thread that starts
    // it: narrowed to the first core while it starts, they stay off the PMD threads' cores.
    // SAFETY: cpu_set_t is plain bits; all zero is an empty set.
    let mut control: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: main_core() is below CPU_SETSIZE; `control` is a valid set.
    unsafe { libc::CPU_SET(main_core(), &mut control) };
    // SAFETY: `control` is a valid cpu_set_t of the size given; 0 is this thread.
    unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &control) };
    // SAFETY: argv holds argc valid NUL-terminated strings that live until after the call;
    // rte_eal_init runs once per process (the OnceLock around `start`).
    let r = unsafe { dpdk_sys::fp_eal_init(argv.len() as i32, argv.as_mut_ptr()) };
    if let Some(set) = saved {
        // SAFETY: `set` is a valid cpu_set_t read from this thread before the call.
        unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    }
    if r < 0 {
        // SAFETY: fp_errno reads rte_errno of this thread.
        let err = unsafe { dpdk_sys::fp_errno() };
        return Err(format!(
            "rte_eal_init({}) failed: {}",
            args[1..].join(" "),
            strerror(err)
        ));
    }
    remove_runtime_dir(&args);
    // SAFETY: rte_version returns a static NUL-terminated string.
    let version = unsafe { CStr::from_ptr(dpdk_sys::fp_version()) }
        .to_string_lossy()
        .into_owned();
    Ok(Eal {
        args,
        hugepages,
        version,
    })
}

/// EAL makes a runtime directory for its file prefix (`/var/run/dpdk/PREFIX` as root, else
/// under `$XDG_RUNTIME_DIR` or `/tmp`) and leaves it behind at exit. When it shares nothing
/// (`--no-shconf`, `--in-memory`) the directory is removed at once if empty; a shared
/// configuration under flowpath's own prefix (`flowpath<pid>`) is removed when the process
/// exits. A prefix the user chose is left alone.
fn remove_runtime_dir(args: &[String]) {
    let Some(prefix) = args.iter().find_map(|a| a.strip_prefix("--file-prefix=")) else {
        return;
    };
    let base = std::env::var_os("XDG_RUNTIME_DIR").map_or_else(
        || std::path::PathBuf::from("/tmp"),
        std::path::PathBuf::from,
    );
    let dirs = [std::path::PathBuf::from("/var/run"), base].map(|d| d.join("dpdk").join(prefix));
    if args
        .iter()
        .any(|a| a == "--no-shconf" || a == "--in-memory")
    {
        for dir in dirs {
            // remove_dir takes only an empty directory: anything EAL keeps there stays.
            let _ = std::fs::remove_dir(dir);
        }
    } else if prefix == own_prefix() && SHARED_RUNTIME_DIRS.set(dirs).is_ok() {
        // SAFETY: registers a plain extern "C" function with no arguments.
        unsafe { libc::atexit(remove_shared_runtime_dirs) };
    }
}

/// flowpath's own file prefix, unique to the process.
fn own_prefix() -> String {
    format!("flowpath{}", std::process::id())
}

/// Where a shared configuration under flowpath's own prefix lives, removed at exit.
static SHARED_RUNTIME_DIRS: OnceLock<[std::path::PathBuf; 2]> = OnceLock::new();

extern "C" fn remove_shared_runtime_dirs() {
    for dir in SHARED_RUNTIME_DIRS.get().into_iter().flatten() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_hugepages_runs_on_fixed_ordinary_memory() {
        let o = EalOptions {
            socket_mem: Some("256,128".into()),
            lcore_mask: Some("0x2".into()),
            ..EalOptions::default()
        };
        let (a, huge) = eal_args(&o, 0).unwrap();
        assert!(!huge);
        assert_eq!(a[1..5], ["-c", "0x2", "--no-huge", "--no-shconf"]);
        assert_eq!(a[5..7], ["-m", "384"]);
        assert!(a.contains(&"--no-telemetry".to_owned()));
    }

    #[test]
    fn with_hugepages_runs_in_memory_and_extra_comes_last() {
        let o = EalOptions {
            hugepage_dir: Some("/mnt/huge".into()),
            socket_mem: Some("1024".into()),
            extra: Some("--vdev net_null0 -l 1".into()),
            ..EalOptions::default()
        };
        let (a, huge) = eal_args(&o, 0).unwrap();
        assert!(huge);
        assert_eq!(
            a[1..4],
            ["--huge-dir=/mnt/huge", "--in-memory", "--socket-mem=1024"]
        );
        assert_eq!(a[a.len() - 4..], ["--vdev", "net_null0", "-l", "1"]);
    }

    #[test]
    fn legacy_mem_keeps_a_shared_configuration() {
        for free in [0, 512] {
            let o = EalOptions {
                extra: Some("--legacy-mem".into()),
                ..EalOptions::default()
            };
            let (a, _) = eal_args(&o, free).unwrap();
            assert!(
                !a.iter().any(|x| x == "--no-shconf" || x == "--in-memory"),
                "{a:?}"
            );
            assert!(
                a.iter().any(|x| x.starts_with("--file-prefix=flowpath")),
                "{a:?}"
            );
        }
    }

    #[test]
    fn bad_settings_are_named() {
        let o = EalOptions {
            lcore_mask: Some("zz".into()),
            ..EalOptions::default()
        };
        assert!(
            eal_args(&o, 0)
                .unwrap_err()
                .to_string()
                .starts_with("dpdk-lcore-mask")
        );
        let o = EalOptions {
            socket_mem: Some("lots".into()),
            ..EalOptions::default()
        };
        assert!(
            eal_args(&o, 0)
                .unwrap_err()
                .to_string()
                .starts_with("dpdk-socket-mem")
        );
        assert_eq!(DpdkInit::parse("try"), Some(DpdkInit::Try));
        assert_eq!(DpdkInit::parse("false"), None);
    }
}
