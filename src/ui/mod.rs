//! The interactive terminal UI: live or replayed snapshots, an ASH chart and a
//! drill-down table of top groups, a thread view, export.
//!
//! `app` holds the state and what keys do (no terminal, unit-tested), with
//! `stacks` for the stack view's state and `stack_tree` for its call tree;
//! `history` stores snapshots compactly; `view` caches aggregation; the
//! `*_view`, `chart`, `help`, `picker` and `render` modules draw; `term`
//! restores the terminal whatever happens; `export` writes files.
//!
//! Wiring (main.rs):
//! ```text
//! let sampler = Sampler::start(opts)?;
//! let source = ui::Source::Live {
//!     snapshots: sampler.receiver().clone(),
//!     all: opts.all,
//!     set_all: Box::new(|all| sampler.set_all(all)),
//! };
//! let res = ui::run(source, sampler.session().clone(), ui_opts);
//! sampler.stop();
//! res?;
//! // replay: ui::run(ui::Source::Replay(rec.snapshots), rec.session, ui_opts)
//! ```
//! `export::write_recording` is the one place exports write samples; it
//! writes CSV until `recording::write_file` is called from it (then set
//! `export::RECORDING_EXT` to "xtop").

pub mod app;
pub mod chart;
pub mod export;
pub mod help;
pub mod history;
pub mod keys;
pub mod main_view;
pub mod picker;
pub mod render;
pub mod stack_tree;
pub mod stack_view;
pub mod stacks;
pub mod syscall_args;
pub mod term;
pub mod thread_view;
pub mod timeline;
pub mod view;

#[cfg(test)]
mod chart_tests;
#[cfg(test)]
mod stack_tests;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::bail;
use crossbeam_channel::{Receiver, TryRecvError};
use crossterm::event::{self, Event};

use crate::model::{Session, Snapshot};

pub use app::{App, Effect, UiOptions};

/// Where snapshots come from.
pub enum Source<'a> {
    /// A running sampler: its channel, whether it currently reports all
    /// threads, how to switch that (`a`), and its warnings raised while
    /// sampling, taken as they come.
    Live {
        snapshots: Receiver<Snapshot>,
        all: bool,
        set_all: Box<dyn FnMut(bool) + 'a>,
        notices: Box<dyn FnMut() -> Vec<String> + 'a>,
    },
    /// A recording, oldest first.
    Replay(Vec<Snapshot>),
}

/// Time per loop spent taking in snapshots, and grouping, so keys stay responsive.
const INGEST_BUDGET: Duration = Duration::from_millis(20);
const GROUP_BUDGET: Duration = Duration::from_millis(25);
/// Longest wait for a key before looking for snapshots and signals again.
const POLL: Duration = Duration::from_millis(100);
/// Redraw at least this often even when nothing changed (toasts expire).
const IDLE_REDRAW: Duration = Duration::from_secs(1);

/// Runs the UI until the user quits or a signal arrives; the terminal is
/// restored on every way out.
/// The interactive screen needs a terminal on both ends; say so before any
/// BPF is loaded.
pub fn require_terminal() -> anyhow::Result<()> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        bail!("the interactive screen needs a terminal: use `xtop -b` to write text to a pipe or file");
    }
    Ok(())
}

pub fn run(source: Source<'_>, session: Session, opts: UiOptions) -> anyhow::Result<()> {
    require_terminal()?;
    let (live, all) = match &source {
        Source::Live { all, .. } => (true, *all),
        Source::Replay(_) => (false, false),
    };
    let mut app = App::new(session, &opts, live, all);
    if !opts.warnings.is_empty() {
        app.say(opts.warnings.join("; "), true);
    }
    let (rx, mut set_all, mut notices, mut pending) = match source {
        Source::Live {
            snapshots,
            set_all,
            notices,
            ..
        } => (Some(snapshots), Some(set_all), Some(notices), VecDeque::new()),
        Source::Replay(snaps) => {
            app.start_replay(&snaps);
            (None, None, None, VecDeque::from(snaps))
        }
    };
    let mut term = term::Term::enter()?;
    let mut dirty = true;
    let mut last_draw = Instant::now();
    loop {
        if term::signalled() {
            break;
        }
        if dirty || app.pending() || last_draw.elapsed() >= IDLE_REDRAW {
            let size = term.terminal.size()?;
            let (cols, page) = render::geometry(size.width, size.height);
            app.prepare(cols, page, Some(GROUP_BUDGET));
            term.terminal.draw(|f| render::draw(f, &app))?;
            dirty = false;
            last_draw = Instant::now();
        }
        let timeout = if app.pending() { Duration::ZERO } else { POLL };
        if event::poll(timeout)? {
            // Take every queued event, then redraw before anything else (new
            // snapshots wait a frame), so held keys do not lag.
            loop {
                // Resize, focus and paste need nothing but the redraw.
                if let Event::Key(k) = event::read()? {
                    match app.handle_key(&k) {
                        Effect::Quit => return Ok(()),
                        Effect::SetAll(all) => {
                            if let Some(f) = set_all.as_mut() {
                                f(all);
                            }
                        }
                        Effect::None => {}
                    }
                }
                dirty = true;
                if !event::poll(Duration::ZERO)? {
                    break;
                }
            }
            continue;
        }
        let started = Instant::now();
        if let Some(rx) = &rx {
            while started.elapsed() < INGEST_BUDGET {
                match rx.try_recv() {
                    Ok(s) => {
                        app.push(s);
                        dirty = true;
                        let said = notices.as_mut().map(|n| n()).unwrap_or_default();
                        if !said.is_empty() {
                            app.say(said.join("; "), true);
                        }
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        dirty |= !app.source_ended;
                        app.source_ended = true;
                        break;
                    }
                }
            }
        } else if let Some((done, total)) = app.loading {
            let mut n = done;
            while started.elapsed() < INGEST_BUDGET {
                let Some(s) = pending.pop_front() else { break };
                app.push(s);
                n += 1;
            }
            app.loading = (n < total).then_some((n, total));
            dirty = true;
        }
    }
    Ok(())
}
