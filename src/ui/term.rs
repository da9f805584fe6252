//! Terminal setup and, above all, restore: on return, on error, on panic and
//! on SIGTERM/SIGHUP/SIGINT, the user gets their shell back intact.

use std::io::{self, Stdout, Write};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use crossterm::{cursor, execute, terminal};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

/// Whether we changed the terminal (so restore is a no-op otherwise).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Set by the signal handler; the event loop checks it and exits normally.
static SIGNALLED: AtomicBool = AtomicBool::new(false);
/// Which signal, for the exit status if the watchdog has to end the process.
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// How long the event loop gets to notice a signal before the watchdog exits.
const GRACE: Duration = Duration::from_secs(1);

const SIGNALS: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGHUP, libc::SIGINT];

extern "C" fn on_signal(sig: libc::c_int) {
    // Only atomic stores: the one thing safe to do in a signal handler.
    SIGNAL.store(sig, Ordering::SeqCst);
    SIGNALLED.store(true, Ordering::SeqCst);
}

/// After a hangup crossterm's event reader retries its dead tty forever without
/// returning to our loop (seen: 90 % CPU, SIGTERM ignored). If a signal is not
/// acted on within GRACE, restore what can be and exit with 128 + signal.
fn start_watchdog() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = std::thread::Builder::new()
            .name("xtop-watchdog".into())
            .spawn(|| loop {
                std::thread::sleep(GRACE / 4);
                if !(signalled() && ACTIVE.load(Ordering::SeqCst)) {
                    continue;
                }
                std::thread::sleep(GRACE);
                if ACTIVE.load(Ordering::SeqCst) {
                    restore();
                    std::process::exit(128 + SIGNAL.load(Ordering::SeqCst));
                }
            });
    });
}

pub fn signalled() -> bool {
    SIGNALLED.load(Ordering::SeqCst)
}

/// Owns the terminal while the UI runs; dropping it restores everything,
/// including the signal dispositions it replaced.
pub struct Term {
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
    old: Vec<(libc::c_int, libc::sigaction)>,
}

impl Term {
    pub fn enter() -> anyhow::Result<Term> {
        SIGNALLED.store(false, Ordering::SeqCst);
        let mut old = Vec::new();
        for sig in SIGNALS {
            // SAFETY: a zeroed sigaction plus a handler that only stores an atomic.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
                libc::sigemptyset(&mut sa.sa_mask);
                let mut prev: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &sa, &mut prev) == 0 {
                    old.push((sig, prev));
                }
            }
        }
        install_panic_hook();
        start_watchdog();
        let term = Term {
            terminal: Terminal::new(CrosstermBackend::new(io::stdout()))?,
            old,
        };
        terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        // Clear with a plain escape: ratatui's clear() asks the terminal where the
        // cursor is, and consoles that never answer would make xtop give up.
        execute!(
            io::stdout(),
            terminal::EnterAlternateScreen,
            cursor::Hide,
            terminal::Clear(terminal::ClearType::All)
        )?;
        Ok(term)
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        restore();
        for (sig, prev) in &self.old {
            // SAFETY: putting back the action sigaction gave us.
            unsafe {
                libc::sigaction(*sig, prev, std::ptr::null_mut());
            }
        }
    }
}

/// Leaves the alternate screen, shows the cursor, ends raw mode. Idempotent.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let mut out = io::stdout();
        let _ = execute!(out, terminal::LeaveAlternateScreen, cursor::Show);
        let _ = terminal::disable_raw_mode();
        let _ = out.flush();
    }
}

/// Restores the terminal before the panic message prints, so it is readable.
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            prev(info);
        }));
    });
}
