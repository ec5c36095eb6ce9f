//! The binary's signals and terminal, its one place for them and for the
//! `unsafe` they need (but `signal(2)`'s, in the `install` it shares with
//! `src/sys.rs`): a SIGINT handler that sets a flag, the conventional end
//! on a closed stdout, the one terminal query the CLI needs (its size, for
//! `status --watch`) and the wait of an idle `status --watch` that notices its
//! reader went away. A module of the binary (`mod sys` in `src/main.rs`),
//! below `ui`, `demo` and `cli` and knowing none of them; the library's own
//! signal (SIGTERM, for the run layer's `StopFlag`) is `src/sys.rs`, whose
//! `install` this module shares.

use std::sync::atomic::{AtomicBool, Ordering};

// The library's `src/sys.rs`, compiled into the binary as well: its `install`
// serves both (the binary sees the library only through its public API). Its
// SIGTERM flag is the library's and goes unused here.
#[allow(dead_code)]
#[path = "sys.rs"]
mod signals;
use signals::install;

static SIGINT_RECEIVED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    SIGINT_RECEIVED.store(true, Ordering::SeqCst);
}

/// Installs a SIGINT (Ctrl-C) handler that records the signal for
/// [`sigint_received`] instead of terminating the process, so the caller can
/// clean up first. Returns false if it could not be installed.
pub fn install_sigint_handler() -> bool {
    install(libc::SIGINT, on_sigint)
}

/// True once SIGINT arrived after [`install_sigint_handler`].
pub fn sigint_received() -> bool {
    SIGINT_RECEIVED.load(Ordering::SeqCst)
}

/// Ends the process the way a Unix tool ends when the reader of its stdout
/// went away (`runlog status | head`): killed by SIGPIPE, with no message, so
/// a shell sees status 141. Rust ignores SIGPIPE, so a write to a closed pipe
/// returns `EPIPE` instead; the CLI calls this when one reaches it. Returns
/// only if the signal could not be delivered; the caller then exits 141.
pub fn end_by_sigpipe() {
    #[allow(unsafe_code)]
    // SAFETY: restoring the default disposition of a valid signal number and
    // raising it in this thread; no handler of ours runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
}

/// The size of the terminal on stdout as (rows, columns); `None` when stdout
/// is not a terminal or reports no size.
pub fn terminal_size() -> Option<(usize, usize)> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    #[allow(unsafe_code)]
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which points
    // to a live, properly aligned `winsize` owned by this frame.
    let r = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    (r == 0 && ws.ws_row > 0 && ws.ws_col > 0).then_some((ws.ws_row as usize, ws.ws_col as usize))
}

/// Waits up to `timeout`; true as soon as stdout is a pipe (or socket) whose
/// reader has gone, so that a process that writes only now and then (an idle
/// `status --watch | head`) ends then rather than at its next write, which
/// may never come. `poll` asks for no event, so only the error and hang-up
/// conditions wake it: a pipe without readers reports `POLLERR`; a terminal or
/// a regular file reports neither and the call simply sleeps.
pub fn stdout_reader_gone(timeout: std::time::Duration) -> bool {
    let mut fd = libc::pollfd {
        fd: libc::STDOUT_FILENO,
        events: 0,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    #[allow(unsafe_code)]
    // SAFETY: `poll` reads and writes exactly one `pollfd` through the pointer,
    // which points to a live, properly aligned `pollfd` owned by this frame.
    let r = unsafe { libc::poll(&mut fd, 1, ms) };
    if r < 0 {
        // EINTR (a signal): the caller's loop redraws and waits again.
        return false;
    }
    r > 0 && fd.revents & (libc::POLLERR | libc::POLLHUP) != 0
}
