//! The process's signals and waits, the library's one place for them and
//! for the `unsafe` they need: a SIGTERM handler that sets a flag, for the
//! run layer's `StopFlag`, and the wait of a server's accepting loop
//! (`readable_within`). Crate-private and below every layer (it knows none).
//! The binary's own signals and terminal (SIGINT, the end on a closed stdout,
//! the terminal's size) are `src/main_sys.rs`, a module of the binary, which
//! compiles this file too for [`install`] (it sees the library only through
//! its public API, which this module is not part of).

use std::sync::atomic::{AtomicBool, Ordering};

static SIGTERM_RECEIVED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigterm(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    SIGTERM_RECEIVED.store(true, Ordering::SeqCst);
}

/// Installs `handler` for `signal`; false if it could not be installed. The
/// handler must be async-signal-safe (an atomic store, as both callers' are).
pub(crate) fn install(signal: libc::c_int, handler: extern "C" fn(libc::c_int)) -> bool {
    let handler = handler as libc::sighandler_t;
    #[allow(unsafe_code)]
    // SAFETY: `signal` is given a valid signal number and a handler with the C ABI
    // that performs only an atomic store, which is async-signal-safe.
    let prev = unsafe { libc::signal(signal, handler) };
    prev != libc::SIG_ERR
}

/// Installs a SIGTERM handler that records the signal for [`sigterm_received`]
/// instead of terminating the process. Returns false if it could not be installed.
pub fn install_sigterm_handler() -> bool {
    install(libc::SIGTERM, on_sigterm)
}

/// True once SIGTERM arrived after [`install_sigterm_handler`].
pub fn sigterm_received() -> bool {
    SIGTERM_RECEIVED.load(Ordering::SeqCst)
}

/// Waits up to `timeout` for `fd` to be readable (for a listening socket: a
/// connection to accept). False on timeout or on a signal (EINTR): the
/// caller's loop looks at its stop conditions and waits again.
pub(crate) fn readable_within(
    fd: std::os::fd::BorrowedFd<'_>,
    timeout: std::time::Duration,
) -> bool {
    use std::os::fd::AsRawFd;
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    #[allow(unsafe_code)]
    // SAFETY: `poll` reads and writes exactly one `pollfd` through the pointer,
    // which points to a live, properly aligned `pollfd` owned by this frame;
    // the descriptor is borrowed, so it stays open for the call.
    let r = unsafe { libc::poll(&mut p, 1, ms) };
    r > 0 && p.revents & libc::POLLIN != 0
}
