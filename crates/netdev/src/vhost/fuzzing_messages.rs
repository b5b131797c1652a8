//! A hostile vhost-user front-end for the `vhost_msg` fuzz target and its regression test: a
//! stream of protocol messages built from arbitrary bytes, each sent with up to three file
//! descriptors (memory files of a size the input picks), served by the port's own control
//! path (`protocol::serve`, rust-vmm's decoder and the back-end's handler) over a
//! socket pair until the stream ends.
//!
//! The front-end is a trust boundary: a VM's QEMU, or any process that can reach the socket,
//! may send any request with any sizes, addresses and descriptors. Whatever it sends, the
//! switch must not crash (a region past the end of its file faults when a ring is read), hang,
//! or keep anything once the connection ends.
//!
//! Not an API: public only so that the fuzz crate and the tests outside this crate reach it.

use std::fs::File;
use std::io::{IoSlice, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use super::Shared;
use super::lock;
use super::options::VhostOptions;
use super::protocol::serve;

/// Bytes of a vhost-user message header: request, flags, payload size.
pub const HEADER: usize = 12;
/// Flags bit of a reply.
const REPLY: u32 = 0x4;
/// The protocol version in the flags' low bits.
const VERSION: u32 = 0x1;
/// At most this many descriptors are sent with one input (each in flight until read).
const MAX_FDS: usize = 48;

/// What serving one input did, for the checks.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Served {
    /// Messages sent, and descriptors sent with them.
    pub messages: usize,
    pub fds: usize,
    /// Replies the back-end wrote, each a whole message with the reply flag.
    pub replies: usize,
    /// The most vrings started at once during the connection.
    pub most_started: usize,
    /// Vrings still started, and whether the port still called itself connected, once the
    /// connection ended (both must be none).
    pub started_after: usize,
    pub connected_after: bool,
    /// Memory files the process still holds open, and still has mapped, once the connection
    /// ended (both must be none).
    pub files_held_after: usize,
    pub mappings_after: usize,
}

/// One message of the input: `[how, request, payload length, size field]` then the payload.
/// `how`: bits 0-1 descriptors to attach, bit 2 the header's size field taken from the input
/// (else the payload's length), bit 3 the flags' byte taken from the size field's byte (else
/// version 1), bits 5-7 the memory files' size (4 KiB << n).
struct Record<'a> {
    how: u8,
    request: u8,
    size_field: u8,
    payload: &'a [u8],
}

fn records(mut data: &[u8]) -> Vec<Record<'_>> {
    let mut out = Vec::new();
    while let [how, request, len, size_field, rest @ ..] = data {
        let n = (*len as usize).min(rest.len());
        out.push(Record {
            how: *how,
            request: *request,
            size_field: *size_field,
            payload: &rest[..n],
        });
        data = &rest[n..];
    }
    out
}

impl Record<'_> {
    fn header(&self) -> [u8; HEADER] {
        let size = if self.how & 4 != 0 {
            u32::from(self.size_field)
        } else {
            self.payload.len() as u32
        };
        let flags = if self.how & 8 != 0 {
            u32::from(self.size_field)
        } else {
            VERSION
        };
        let mut h = [0u8; HEADER];
        h[0..4].copy_from_slice(&u32::from(self.request).to_le_bytes());
        h[4..8].copy_from_slice(&flags.to_le_bytes());
        h[8..12].copy_from_slice(&size.to_le_bytes());
        h
    }

    fn fds(&self) -> usize {
        usize::from(self.how & 3)
    }

    fn file_size(&self) -> u64 {
        4096 << (self.how >> 5)
    }
}

/// The name the memory files carry (`/proc/self/fd` and `/proc/self/maps` show it).
const FILE_NAME: &str = "vhost-fuzz-guest";

/// Open descriptors of this process on the memory files, and its mappings of them.
fn memory_files_held() -> (usize, usize) {
    let tag = format!("memfd:{FILE_NAME}");
    let fds = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter(|l| l.to_string_lossy().contains(&tag))
                .count()
        })
        .unwrap_or(0);
    let maps = std::fs::read_to_string("/proc/self/maps")
        .map(|m| m.lines().filter(|l| l.contains(&tag)).count())
        .unwrap_or(0);
    (fds, maps)
}

/// A memory file of `size` zero bytes, as a front-end shares guest memory.
fn memory_file(size: u64) -> File {
    // SAFETY: a plain system call with a NUL-terminated name; the descriptor it returns is
    // owned by the `File` made from it below and nothing else.
    let fd = unsafe { libc::memfd_create(c"vhost-fuzz-guest".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` was just created and is owned by no one else.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(size).expect("sizing a memory file");
    f
}

/// Sends `bytes` with the descriptors `fds` attached (`SCM_RIGHTS`).
fn send_with_fds(sock: &UnixStream, bytes: &[u8], fds: &[File]) -> std::io::Result<()> {
    if fds.is_empty() {
        return (&*sock).write_all(bytes);
    }
    let raw: Vec<i32> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    let data_len = std::mem::size_of_val(&raw[..]);
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(data_len as u32) } as usize;
    let mut control = vec![0u8; space];
    let iov = [IoSlice::new(bytes)];
    // SAFETY: a zeroed msghdr is a valid empty one; the fields set below point to `iov` and
    // `control`, which outlive the `sendmsg` call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space;
    // SAFETY: `msg` has a control buffer of CMSG_SPACE(data_len) bytes, so the first header
    // and its data fit in it.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(data_len as u32) as usize;
        std::ptr::copy_nonoverlapping(raw.as_ptr(), libc::CMSG_DATA(c).cast(), raw.len());
    }
    // SAFETY: `msg` is fully initialised above; the socket is open.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // The rest of a short write goes without the descriptors (they went with its start).
    (&*sock).write_all(&bytes[n as usize..])
}

/// Counts the replies in what the back-end wrote; `None` when it is not a sequence of whole
/// messages, each flagged a reply of protocol version 1.
fn count_replies(mut out: &[u8]) -> Option<usize> {
    let mut n = 0;
    while !out.is_empty() {
        let h = out.get(..HEADER)?;
        let flags = u32::from_le_bytes(h[4..8].try_into().ok()?);
        let size = u32::from_le_bytes(h[8..12].try_into().ok()?) as usize;
        if flags & REPLY == 0 || flags & 3 != VERSION {
            return None;
        }
        out = out.get(HEADER + size..)?;
        n += 1;
    }
    Some(n)
}

/// Sends the messages of `data` to a back-end with two queue pairs, ends the stream, serves it
/// to the end, and reports what happened. Panics when the back-end's replies are not whole
/// reply messages.
pub fn serve_messages(data: &[u8]) -> Served {
    let shared = Arc::new(Shared::new("fuzz", 2));
    let opts = VhostOptions {
        queues: 2,
        ..VhostOptions::default()
    };
    let (front, back) = UnixStream::pair().expect("a socket pair");
    let reader = front.try_clone().expect("a second handle on the socket");
    let replies = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = (&reader).read_to_end(&mut out);
        out
    });
    let mut served = Served::default();
    let server = {
        let shared = shared.clone();
        std::thread::spawn(move || serve(&shared, &opts, back))
    };
    for r in records(data) {
        let n = if served.fds + r.fds() <= MAX_FDS {
            r.fds()
        } else {
            0
        };
        let files: Vec<File> = (0..n).map(|_| memory_file(r.file_size())).collect();
        let mut bytes = r.header().to_vec();
        bytes.extend_from_slice(r.payload);
        if send_with_fds(&front, &bytes, &files).is_err() {
            break; // the back-end closed the connection
        }
        served.messages += 1;
        served.fds += n;
    }
    let _ = front.shutdown(std::net::Shutdown::Write);
    server.join().expect("the control path panicked");
    let _ = front.shutdown(std::net::Shutdown::Both);
    let out = replies.join().expect("the reply reader");
    served.replies = count_replies(&out)
        .unwrap_or_else(|| panic!("the back-end wrote what is not whole replies: {out:02x?}"));
    served.most_started = lock(&shared.status).most_started;
    served.started_after = lock(&shared.status).started;
    served.connected_after = lock(&shared.status).connected;
    (served.files_held_after, served.mappings_after) = memory_files_held();
    served
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed(name: &str) -> Vec<u8> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/fuzz/vhost_msg/");
        std::fs::read(format!("{dir}{name}")).expect("a committed input")
    }

    #[test]
    fn a_whole_set_up_starts_every_ring_and_the_end_of_the_stream_stops_them() {
        let s = serve_messages(&seed("session"));
        assert_eq!(
            s.most_started, 2,
            "both rings of the first queue pair: {s:?}"
        );
        assert_eq!((s.started_after, s.connected_after), (0, false), "{s:?}");
        assert_eq!((s.files_held_after, s.mappings_after), (0, 0), "{s:?}");
        assert_eq!(s.replies, 1, "GET_FEATURES answered: {s:?}");
    }

    #[test]
    fn a_region_past_the_end_of_its_file_is_refused_and_no_ring_starts() {
        for name in ["region-past-end-of-file", "region-offset-past-end-of-file"] {
            let s = serve_messages(&seed(name));
            assert_eq!(s.most_started, 0, "{name}: {s:?}");
            assert_eq!(
                (s.files_held_after, s.mappings_after),
                (0, 0),
                "{name}: {s:?}"
            );
        }
    }
}
