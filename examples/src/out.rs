//! `out`: writing to stdout and stderr without ever panicking. A closed stdout (`mcp … | head
//! -1`) is a quiet end: the write reports it, the run is asked to stop
//! ([`crate::signals::Stop::StdoutClosed`]: in-flight calls are cancelled, servers closed, exit
//! 0) and nothing more is written. A closed stderr loses the diagnostics, nothing else.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Whether stdout was found closed (a reader that went away).
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

/// Writes `bytes` to stdout and flushes. False when stdout is closed (it is then never written
/// again, and the run is asked to stop quietly) or failed otherwise (reported once on stderr).
pub fn stdout(bytes: &[u8]) -> bool {
    if stdout_closed() {
        return false;
    }
    let mut o = io::stdout().lock();
    match o.write_all(bytes).and_then(|()| o.flush()) {
        Ok(()) => true,
        Err(e) => {
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
            if e.kind() != io::ErrorKind::BrokenPipe {
                stderr_line(&format!("mcp: cannot write to stdout: {e}"));
            }
            crate::signals::request_stop(crate::signals::Stop::StdoutClosed);
            false
        }
    }
}

/// `line` and a newline on stdout (see [`stdout`]).
pub fn stdout_line(line: &str) -> bool {
    let mut b = Vec::with_capacity(line.len() + 1);
    b.extend_from_slice(line.as_bytes());
    b.push(b'\n');
    stdout(&b)
}

/// `line` and a newline on stderr; a closed stderr is ignored.
pub fn stderr_line(line: &str) {
    let mut e = io::stderr().lock();
    let _ = writeln!(e, "{line}");
}

/// `text` on stderr as it is (no newline added); a closed stderr is ignored.
pub fn stderr(text: &str) {
    let mut e = io::stderr().lock();
    let _ = e.write_all(text.as_bytes());
    let _ = e.flush();
}
