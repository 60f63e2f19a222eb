//! What the `cairn` process does on a signal, set in one place.
//!
//! - SIGPIPE: the default (end quietly) for the commands that print, so
//!   `cairn disk list | head` stops when `head` does; ignored by the
//!   service, for which a client gone mid-answer is an EPIPE on that
//!   connection only.
//! - SIGINT and SIGUSR1 during the benchmark commands: a flag each
//!   ([`INTERRUPTED`], [`END_PAUSE`]), which the long loops poll.
//!
//! The service's own SIGTERM, SIGINT, SIGHUP and SIGUSR1 are blocked and
//! waited for by `cairn_serve::Signals`, not handled here.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, LazyLock, Once};

/// Set by Ctrl-C (SIGINT) once [`install_interrupt_handler`] has run: long
/// work stops cleanly and keeps what it measured, instead of dying mid-write.
pub(crate) static INTERRUPTED: LazyLock<Arc<AtomicBool>> = LazyLock::new(Arc::default);

/// Set by SIGUSR1 (`kill -USR1`) once [`install_end_pause_handler`] has
/// run: the pause between runs (`pause=`) under way ends at once, and the
/// next run starts.
pub(crate) static END_PAUSE: LazyLock<Arc<AtomicBool>> = LazyLock::new(Arc::default);

/// From here on Ctrl-C sets [`INTERRUPTED`] (and no longer ends the process).
pub(crate) fn install_interrupt_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| set_flag_on(signal_hook::consts::SIGINT, &INTERRUPTED));
}

/// From here on SIGUSR1 sets [`END_PAUSE`] (and no longer ends the process).
pub(crate) fn install_end_pause_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| set_flag_on(signal_hook::consts::SIGUSR1, &END_PAUSE));
}

fn set_flag_on(signal: libc::c_int, flag: &Arc<AtomicBool>) {
    signal_hook::flag::register(signal, Arc::clone(flag))
        .expect("invariant: SIGINT and SIGUSR1 may be handled (only SIGKILL, SIGSTOP and the fault signals may not)");
}

/// SIGPIPE ends the process, as it does any Unix tool's. Rust's runtime
/// ignores it before `main`; signal-hook only adds handlers, so setting a
/// disposition is done here. Call it before any thread exists.
pub(crate) fn sigpipe_ends_the_process() {
    set_sigpipe(libc::SIG_DFL);
}

/// SIGPIPE is ignored: a write to a reader gone is an EPIPE for that write.
pub(crate) fn sigpipe_ignored() {
    set_sigpipe(libc::SIG_IGN);
}

fn set_sigpipe(disposition: libc::sighandler_t) {
    // SAFETY: SIG_DFL and SIG_IGN are the only dispositions given (no
    // handler function runs), for a valid signal number.
    unsafe {
        libc::signal(libc::SIGPIPE, disposition);
    }
}
