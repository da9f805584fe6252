//! Screen tests: fixture snapshots rendered on ratatui's TestBackend, and key
//! sequences applied to the app state without a terminal.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

use crate::model::fixture::busy_snapshot;
use crate::model::{Arch, Session};

use super::app::{App, UiOptions};
use super::render;

pub(crate) fn session() -> Session {
    Session {
        host: "db1".into(),
        kernel: "6.8.0".into(),
        arch: Arch::X86_64,
        ncpus: 2,
        interval: Duration::from_secs(1),
        xtop_version: "0.1.0".into(),
        options: String::new(),
    }
}

/// Rendered times are local: pin the zone so expected screens match anywhere.
fn utc() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::env::set_var("TZ", "UTC");
        extern "C" {
            fn tzset();
        }
        // SAFETY: tzset only rereads TZ; done once, before any rendering.
        unsafe { tzset() };
    });
}

pub(crate) fn app(n: u64, live: bool) -> App {
    utc();
    let mut app = App::new(session(), &UiOptions::default(), live, false);
    for i in 0..n {
        app.push(busy_snapshot(i));
    }
    app
}

pub(crate) fn screen(app: &mut App, w: u16, h: u16) -> String {
    let (cols, page) = render::geometry(w, h);
    app.prepare(cols, page, None);
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| render::draw(f, app)).unwrap();
    let buf = t.backend().buffer();
    let mut out = String::new();
    for y in 0..h {
        let line: String = (0..w).map(|x| buf[(x, y)].symbol()).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

pub(crate) fn key(app: &mut App, code: KeyCode) -> super::Effect {
    app.handle_key(&KeyEvent::new(code, KeyModifiers::NONE))
}

pub(crate) fn typed(app: &mut App, text: &str) {
    for c in text.chars() {
        key(app, KeyCode::Char(c));
    }
}

#[test]
fn main_view() {
    let mut a = app(30, true);
    print!("{}", screen(&mut a, 80, 24));
}
