//! The terminal `flowpath top` draws on: on a TTY, the cursor hidden, each screen drawn over
//! the last (cursor home, every line erased to its end, the rest erased below), input read key
//! by key without echo so that `q` quits; a view that runs until `q` takes the alternate screen
//! (as `top` does), one with a count of screens leaves its last screen on the terminal.
//! Otherwise plain blocks of lines separated by a line of dashes, so `flowpath top -n 2 | cat`
//! reads well in scripts. Ctrl-C (and SIGTERM) end the view too; the terminal is restored
//! however it ends.
//!
//! The size comes from `TIOCGWINSZ` on each screen, 80x24 when the terminal does not say; a
//! resized window (SIGWINCH) has the screen drawn again at once, fitted.

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::termios::{self, LocalModes, OptionalActions, SpecialCodeIndex, Termios};

/// The size assumed when the terminal does not give one.
const DEFAULT_SIZE: (usize, usize) = (80, 24);
/// Width of the blocks written to a pipe or file.
const PLAIN_WIDTH: usize = 80;
/// The longest wait between two looks at the stop flag.
const TICK: Duration = Duration::from_millis(50);

/// Where the screens go, and the terminal state to put back.
pub struct Terminal {
    /// Whether stdout is a terminal.
    tty: bool,
    /// Stdin's settings before key-by-key input, when stdin is a terminal.
    saved: Option<Termios>,
    /// Whether the view is on the alternate screen.
    alternate: bool,
    /// Set by SIGINT or SIGTERM.
    stop: Arc<AtomicBool>,
    /// Set by SIGWINCH.
    resized: Arc<AtomicBool>,
    /// Screens drawn so far.
    drawn: u64,
}

/// Why a wait ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Wake {
    /// The time was up.
    Timeout,
    /// `q`, Ctrl-C or SIGTERM.
    Quit,
    /// The terminal changed size.
    Resize,
}

impl Terminal {
    /// Takes over the terminal when stdout is one (hidden cursor, keys without echo or line
    /// editing, Ctrl-C still interrupting; the alternate screen with `alternate`).
    pub fn open(alternate: bool) -> anyhow::Result<Terminal> {
        let stop = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, stop.clone())?;
        }
        let tty = termios::isatty(io::stdout());
        let resized = Arc::new(AtomicBool::new(false));
        if tty {
            signal_hook::flag::register(signal_hook::consts::SIGWINCH, resized.clone())?;
        }
        let mut t = Terminal {
            tty,
            saved: None,
            alternate: tty && alternate,
            stop,
            resized,
            drawn: 0,
        };
        if tty {
            let stdin = io::stdin();
            if termios::isatty(stdin.as_fd()) {
                let saved = termios::tcgetattr(stdin.as_fd())?;
                let mut keys = saved.clone();
                keys.local_modes &= !(LocalModes::ICANON | LocalModes::ECHO);
                keys.special_codes[SpecialCodeIndex::VMIN] = 1;
                keys.special_codes[SpecialCodeIndex::VTIME] = 0;
                termios::tcsetattr(stdin.as_fd(), OptionalActions::Now, &keys)?;
                t.saved = Some(saved);
            }
            let mut out = io::stdout();
            if t.alternate {
                out.write_all(b"\x1b[?1049h")?;
            }
            // The screen is cleared once; each screen then overdraws the last.
            out.write_all(b"\x1b[?25l\x1b[H\x1b[2J")?;
            out.flush()?;
        }
        Ok(t)
    }

    /// Columns and lines to draw in; no line limit when stdout is not a terminal.
    pub fn size(&self) -> (usize, Option<usize>) {
        if !self.tty {
            return (PLAIN_WIDTH, None);
        }
        match termios::tcgetwinsize(io::stdout()) {
            Ok(w) if w.ws_col > 0 && w.ws_row > 0 => (w.ws_col as usize, Some(w.ws_row as usize)),
            _ => (DEFAULT_SIZE.0, Some(DEFAULT_SIZE.1)),
        }
    }

    /// Draws one screen on `out` (stdout) and flushes it.
    pub fn draw(&mut self, out: &mut impl Write, lines: &[String]) -> io::Result<()> {
        let text = if self.tty {
            screen(lines)
        } else {
            block(lines, self.drawn > 0)
        };
        self.drawn += 1;
        out.write_all(text.as_bytes())?;
        out.flush()
    }

    /// Waits `d`, or less when the user quits or the terminal is resized.
    pub fn wait(&mut self, d: Duration) -> io::Result<Wake> {
        let end = Instant::now() + d;
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(Wake::Quit);
            }
            if self.resized.swap(false, Ordering::Relaxed) {
                return Ok(Wake::Resize);
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Wake::Timeout);
            }
            let step = left.min(TICK);
            if self.saved.is_none() {
                std::thread::sleep(step);
            } else if self.quit_key(step)? {
                return Ok(Wake::Quit);
            }
        }
    }

    /// Waits up to `d` for keys on stdin; whether one was `q`.
    fn quit_key(&self, d: Duration) -> io::Result<bool> {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let stdin = io::stdin();
        let mut fds = [PollFd::new(&stdin, PollFlags::IN)];
        let timeout = Timespec::try_from(d).unwrap_or_default();
        match poll(&mut fds, Some(&timeout)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => return Ok(false),
            Ok(_) => {}
            Err(e) => return Err(e.into()),
        }
        let mut buf = [0u8; 64];
        let n = rustix::io::read(&stdin, &mut buf)?;
        // End of input (the terminal hung up) ends the view as well.
        Ok(n == 0 || buf[..n].iter().any(|&b| b == b'q' || b == b'Q'))
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            let _ = termios::tcsetattr(io::stdin().as_fd(), OptionalActions::Now, saved);
        }
        if self.tty {
            let mut out = io::stdout();
            // The prompt goes under the last screen, or back to the screen before the view.
            let restore: &[u8] = if self.alternate {
                b"\x1b[?25h\x1b[?1049l"
            } else {
                b"\x1b[?25h\n"
            };
            let _ = out.write_all(restore);
            let _ = out.flush();
        }
    }
}

/// A screen drawn over the previous one: cursor home, each line then an erase to its end,
/// an erase of everything below the last. No newline after the last line, which would scroll
/// a screen that fills the terminal; the terminal's output processing makes each newline a
/// carriage return too.
fn screen(lines: &[String]) -> String {
    let mut s = String::from("\x1b[H");
    for (i, l) in lines.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        s.push_str(l);
        s.push_str("\x1b[K");
    }
    s.push_str("\x1b[J");
    s
}

/// A block for a pipe or file, after a line of dashes when it is not the first.
fn block(lines: &[String], separate: bool) -> String {
    let mut s = String::new();
    if separate {
        s.push_str(&"-".repeat(PLAIN_WIDTH));
        s.push('\n');
    }
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_screen_overdraws_and_a_block_appends() {
        let lines = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(screen(&lines), "\x1b[Ha\x1b[K\nb\x1b[K\x1b[J");
        assert_eq!(block(&lines, false), "a\nb\n");
        assert_eq!(block(&lines, true), format!("{}\na\nb\n", "-".repeat(80)));
    }
}
