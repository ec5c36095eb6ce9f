//! The one place with `unsafe`: installing a SIGTERM handler that sets a flag.

use std::sync::atomic::{AtomicBool, Ordering};

static SIGTERM_RECEIVED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigterm(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    SIGTERM_RECEIVED.store(true, Ordering::SeqCst);
}

/// Installs a SIGTERM handler that records the signal for [`sigterm_received`]
/// instead of terminating the process. Returns false if it could not be installed.
pub fn install_sigterm_handler() -> bool {
    let handler = on_sigterm as extern "C" fn(libc::c_int) as libc::sighandler_t;
    #[allow(unsafe_code)]
    // SAFETY: `signal` is given a valid signal number and a handler with the C ABI
    // that performs only an atomic store, which is async-signal-safe.
    let prev = unsafe { libc::signal(libc::SIGTERM, handler) };
    prev != libc::SIG_ERR
}

/// True once SIGTERM arrived after [`install_sigterm_handler`].
pub fn sigterm_received() -> bool {
    SIGTERM_RECEIVED.load(Ordering::SeqCst)
}
