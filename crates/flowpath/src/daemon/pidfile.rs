//! The pidfile, with Open vSwitch's locking protocol (`lib/daemon-unix.c`), so that
//! `ovs-appctl -t NAME`, `ovs-ctl` and a second instance read it as they read
//! `ovs-vswitchd.pid`.
//!
//! The file holds the daemon's pid and a newline, and the daemon keeps a POSIX record lock
//! (`fcntl(F_SETLK)`, write lock over the whole file) on it for as long as it runs. A reader
//! trusts the pid only if `F_GETLK` says that very pid holds the lock: a pidfile nobody locks
//! is stale (its daemon died without removing it) and is deleted by the next instance. The lock
//! is per process and not inherited by `fork`, so the pidfile is made by the daemon process
//! itself, after any detach or monitor fork. Record locks (not `flock` or OFD locks) are what
//! OVS's readers ask about, and `F_GETLK` reports their owner's pid.
//!
//! A process loses every record lock on a file as soon as it closes *any* descriptor of it, so
//! the daemon never opens its own pidfile again once it holds it.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why a pidfile could not be made; the texts are OVS's, which operators' scripts grep for.
#[derive(Debug, thiserror::Error)]
pub enum PidfileError {
    /// Another live process holds the pidfile.
    #[error("{}: already running as pid {pid}, aborting", path.display())]
    AlreadyRunning { path: PathBuf, pid: i32 },
    /// The existing pidfile could not be checked (e.g. another instance is starting right now).
    #[error("{}: pidfile check failed ({source}), aborting", path.display())]
    CheckFailed {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Creating, locking, writing or renaming the temporary file failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
}

/// A pidfile this process made and holds locked; dropping it removes the file (if it is still
/// the one we made).
#[derive(Debug)]
pub struct Pidfile {
    path: PathBuf,
    /// The locked descriptor: it must stay open, closing it releases the lock.
    _file: File,
    dev: u64,
    ino: u64,
}

impl Pidfile {
    /// Makes `path` hold this process's pid, locked. Unless `overwrite`, an instance already
    /// running with this pidfile is an error; a stale pidfile is replaced.
    pub fn create(path: &Path, overwrite: bool) -> Result<Pidfile, PidfileError> {
        let pid = std::process::id();
        // Every instance locks the same temporary file, so that two starting at once cannot
        // both pass the check below; with `overwrite` each has its own.
        let tmp = PathBuf::from(if overwrite {
            format!("{}.tmp{pid}", path.display())
        } else {
            format!("{}.tmp", path.display())
        });
        let io_err = |what: String| move |source| PidfileError::Io { what, source };
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&tmp)
            .map_err(io_err(format!("{}: create failed", tmp.display())))?;
        set_lock(&file).map_err(io_err(format!("{}: fcntl(F_SETLK) failed", tmp.display())))?;
        let done = (|| {
            if !overwrite {
                check_already_running(path)?;
            }
            let meta = file
                .metadata()
                .map_err(io_err(format!("{}: fstat failed", tmp.display())))?;
            file.set_len(0)
                .map_err(io_err(format!("{}: truncate failed", tmp.display())))?;
            writeln!(file, "{pid}")
                .and_then(|()| file.flush())
                .map_err(io_err(format!("{}: write failed", tmp.display())))?;
            std::fs::rename(&tmp, path).map_err(io_err(format!(
                "failed to rename \"{}\" to \"{}\"",
                tmp.display(),
                path.display()
            )))?;
            Ok((meta.dev(), meta.ino()))
        })();
        match done {
            Ok((dev, ino)) => Ok(Pidfile {
                path: path.to_path_buf(),
                _file: file,
                dev,
                ino,
            }),
            Err(e) => {
                // We hold the temporary file's lock, so it is ours to remove.
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }
}

impl Drop for Pidfile {
    fn drop(&mut self) {
        // Only our own file: a successor started with --overwrite-pidfile may have replaced it.
        if let Ok(meta) = std::fs::metadata(&self.path)
            && (meta.dev(), meta.ino()) == (self.dev, self.ino)
        {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The pid of the live process that holds the pidfile at `path`, as `ovs-appctl` reads it:
/// the pid written in the file, if that process holds its lock. `NotFound` when there is no
/// pidfile; `ESRCH` when it is stale.
pub fn read(path: &Path) -> io::Result<i32> {
    match read_or_clean(path, false)? {
        Some(pid) => Ok(pid),
        None => Err(io::Error::from_raw_os_error(libc::ESRCH)),
    }
}

/// An instance already holding `path` is an error; a stale pidfile is removed.
fn check_already_running(path: &Path) -> Result<(), PidfileError> {
    match read_or_clean(path, true) {
        Ok(None) => Ok(()),
        Ok(Some(pid)) => Err(PidfileError::AlreadyRunning {
            path: path.to_path_buf(),
            pid,
        }),
        Err(source) => Err(PidfileError::CheckFailed {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Reads the pid of the process holding `path` locked. `Ok(None)`: no live holder (with
/// `delete_if_stale`, a missing file or a stale one, now deleted).
fn read_or_clean(path: &Path, delete_if_stale: bool) -> io::Result<Option<i32>> {
    let file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound && delete_if_stale => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some(holder) = lock_holder(&file)? else {
        if !delete_if_stale {
            return Ok(None);
        }
        // Only the process that holds the stale file's lock may unlink it, and only if the
        // name still points at that file: otherwise a racing instance's fresh pidfile could go.
        set_lock(&file)?;
        let ours = file.metadata()?;
        let named = std::fs::metadata(path)?;
        if (ours.dev(), ours.ino()) != (named.dev(), named.ino()) {
            return Err(io::Error::from_raw_os_error(libc::EALREADY));
        }
        std::fs::remove_file(path)?;
        return Ok(None);
    };
    let mut line = String::new();
    BufReader::new(&file).read_line(&mut line)?;
    if line.trim().parse::<i32>().ok() != Some(holder) {
        // The lock holder is not the pid written: a stale file being replaced right now.
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(Some(holder))
}

/// A write lock over the whole file, or an error if another process holds one.
fn set_lock(file: &File) -> io::Result<()> {
    let mut lck = whole_file_write_lock();
    fcntl_lock(file, libc::F_SETLK, &mut lck)
}

/// The pid of the process holding a lock on `file` that conflicts with a write lock, if any.
fn lock_holder(file: &File) -> io::Result<Option<i32>> {
    let mut lck = whole_file_write_lock();
    fcntl_lock(file, libc::F_GETLK, &mut lck)?;
    Ok((i32::from(lck.l_type) != libc::F_UNLCK).then_some(lck.l_pid))
}

fn whole_file_write_lock() -> libc::flock {
    // SAFETY: `flock` is a plain C struct of integers, for which all zeroes is a valid value.
    let mut lck: libc::flock = unsafe { std::mem::zeroed() };
    lck.l_type = libc::F_WRLCK as _;
    lck.l_whence = libc::SEEK_SET as _;
    lck
}

fn fcntl_lock(file: &File, cmd: libc::c_int, lck: &mut libc::flock) -> io::Result<()> {
    loop {
        // SAFETY: the descriptor is open for the call (borrowed from `file`) and `lck` points
        // to a valid, exclusively borrowed `flock` that F_SETLK reads and F_GETLK writes.
        let r = unsafe { libc::fcntl(file.as_raw_fd(), cmd, lck as *mut libc::flock) };
        if r != -1 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fp-pidfile-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_stale_pidfile_is_replaced_and_ours_is_removed_on_drop() {
        let d = scratch("stale");
        let path = d.join("x.pid");
        // Nobody holds this one.
        std::fs::write(&path, "999999\n").unwrap();
        assert_eq!(
            read(&path).unwrap_err().raw_os_error(),
            Some(libc::ESRCH),
            "a stale pidfile names nobody"
        );
        let p = Pidfile::create(&path, false).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{}\n", std::process::id())
        );
        assert!(!d.join("x.pid.tmp").exists());
        drop(p);
        assert!(!path.exists());
        assert_eq!(
            read(&path).unwrap_err().kind(),
            io::ErrorKind::NotFound,
            "no pidfile at all"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
