//! The chart's truth on screen: no false holes at any width, real gaps drawn
//! as gaps, the time axis, and the selected row's band.

use std::time::Duration;

use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Modifier;
use ratatui::Terminal;

use crate::model::fixture::busy_snapshot;
use crate::model::Snapshot;

use super::app::{App, UiOptions};
use super::chart::ticks;
use super::render::{self, chart_height, AXIS_W, HEADER_H, NO_DATA};
use super::tests::{key, session, utc};

const H: u16 = 24;

/// Snapshot `seq` taken up to 300 ms late or early, as a busy sampler's are.
fn jittered(seq: u64) -> Snapshot {
    let mut s = busy_snapshot(seq);
    // A fixed pseudo-random walk: the same screens on every run.
    let jitter = (seq.wrapping_mul(2_654_435_761) % 601) as i64 - 300;
    s.time_ns = (s.time_ns as i64 + jitter * 1_000_000) as u64;
    s
}

fn app_of(snaps: impl IntoIterator<Item = Snapshot>, span_s: u64) -> App {
    utc();
    let mut a = App::new(session(), &UiOptions::default(), false, false);
    for s in snaps {
        a.push(s);
    }
    a.span = Duration::from_secs(span_s);
    a
}

fn render(a: &mut App, w: u16) -> Buffer {
    let (cols, page) = render::geometry(w, H);
    a.prepare(cols, page, None);
    let mut t = Terminal::new(TestBackend::new(w, H)).unwrap();
    t.draw(|f| render::draw(f, a)).unwrap();
    t.backend().buffer().clone()
}

/// Rows of the chart: (top body row, bottom body row, time axis row, legend row).
fn rows() -> (u16, u16, u16, u16) {
    let ch = chart_height(H);
    let top = HEADER_H;
    (top, top + ch - 3, top + ch - 2, top + ch - 1)
}

fn line(buf: &Buffer, y: u16) -> String {
    (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect()
}

#[test]
fn steady_jittered_snapshots_leave_no_empty_column_at_any_width() {
    let (_, bottom, _, legend) = rows();
    for span in [10, 30, 60, 120] {
        let mut a = app_of((0..200).map(jittered), span);
        for w in 40..=200u16 {
            let buf = render(&mut a, w);
            let cols = &a.view().chart.cols;
            assert_eq!(cols.len(), (w - AXIS_W) as usize, "the data fills the width");
            for (c, col) in cols.iter().enumerate() {
                let total: f64 = col.as_ref().map_or(0.0, |v| v.iter().sum());
                // The fixture has 5 or 6 active threads in every snapshot.
                assert!(
                    (5.0..=6.0).contains(&total),
                    "{span}s at width {w}: column {c} = {total}"
                );
            }
            let base = line(&buf, bottom);
            let drawn: String = base.chars().skip(AXIS_W as usize).collect();
            assert!(
                drawn.chars().all(|ch| ch == '█'),
                "{span}s at width {w}: bottom row {base:?}"
            );
            assert!(!line(&buf, legend).contains(NO_DATA), "no gap, no gap legend");
        }
    }
}

#[test]
fn a_stalled_sampler_is_drawn_as_a_gap_not_as_an_idle_box() {
    // 0..40 s, nothing from 40 to 70 s (a stall), then 70..100 s.
    let snaps = (0..40).chain(70..100).map(busy_snapshot);
    let mut a = app_of(snaps, 90);
    let w = 96; // 90 columns: one per second
    let buf = render(&mut a, w);
    let cols = &a.view().chart.cols;
    let gaps: Vec<usize> = (0..cols.len()).filter(|&c| cols[c].is_none()).collect();
    // The window is (9 s, 99 s]: the stall's columns are 39 s..69 s,
    // 30..60; snapshot 70 stands for (69 s, 70 s] only, one interval.
    assert_eq!(gaps, (30..60).collect::<Vec<_>>());
    let (top, bottom, _, legend) = rows();
    for y in [top, bottom] {
        let row: Vec<String> = (AXIS_W..w).map(|x| buf[(x, y)].symbol().to_string()).collect();
        for (c, s) in row.iter().enumerate() {
            let want_gap = gaps.contains(&c);
            assert_eq!(s == NO_DATA, want_gap, "row {y} column {c}: {s:?}");
        }
    }
    assert!(
        line(&buf, legend).contains("░ no snapshot"),
        "{}",
        line(&buf, legend)
    );
}

#[test]
fn the_time_axis_shows_the_windows_ends_and_round_times() {
    let mut a = app_of((0..120).map(busy_snapshot), 60);
    let buf = render(&mut a, 80);
    let (_, _, axis, _) = rows();
    // busy_snapshot 119 is at 12:01:59 UTC; the window is the minute before.
    assert_eq!(
        line(&buf, axis).trim_end(),
        "      12:00:59     ╵12:01:10   ╵12:01:20    ╵12:01:30   ╵12:01:40       12:01:59"
    );
    // Round steps for the room there is, strictly inside the window.
    let t0 = busy_snapshot(0).time_ns; // 12:00:00
    let s = 1_000_000_000;
    assert_eq!(
        ticks(t0, t0 + 60 * s, 74),
        [10, 20, 30, 40, 50, 60].map(|x| t0 + x * s)
    );
    assert_eq!(ticks(t0, t0 + 60 * s, 34), [30, 60].map(|x| t0 + x * s));
    assert_eq!(ticks(t0, t0 + 3600 * s, 194).len(), 12, "every 5 minutes");
    assert_eq!(ticks(t0 + s / 2, t0 + 10 * s, 194).first(), Some(&(t0 + s)));
}

#[test]
fn the_selected_rows_band_stands_out() {
    let mut a = app_of((0..60).map(busy_snapshot), 60);
    let w = 100;
    let buf = render(&mut a, w);
    let (top, bottom, _, legend) = rows();
    let chart = a.view().chart.clone();
    let selected_value = a.view().agg.groups[a.rows()[0]].key[0].clone();
    let band = chart.bands.iter().position(|b| *b == selected_value).unwrap();
    let colors = render::band_colors(&chart.bands, chart.other);
    let (mut lit, mut dimmed) = (0, 0);
    for y in top..=bottom {
        for x in AXIS_W..w {
            let cell = &buf[(x, y)];
            if cell.symbol() != "█" {
                continue;
            }
            let dim = cell.modifier.contains(Modifier::DIM);
            assert_eq!(dim, cell.fg != colors[band], "({x},{y}) {cell:?}");
            if dim {
                dimmed += 1
            } else {
                lit += 1
            }
        }
    }
    assert!(lit > 0 && dimmed > 0, "lit {lit} dimmed {dimmed}");
    // The legend names the band reversed.
    let name = selected_value.to_string();
    let at = line(&buf, legend).find(&name).unwrap();
    let x = line(&buf, legend)[..at].chars().count() as u16;
    assert!(buf[(x, legend)].modifier.contains(Modifier::REVERSED));
    // Moving to a row of another first value moves the highlight.
    key(&mut a, crossterm::event::KeyCode::Down);
    let buf = render(&mut a, w);
    let last = a.view().agg.groups[a.rows()[1]].key[0].clone();
    assert_ne!(last, selected_value);
    let band = chart.bands.iter().position(|b| *b == last).unwrap();
    let x = (AXIS_W..w).find(|&x| buf[(x, bottom)].symbol() == "█").unwrap();
    let cell = &buf[(x, bottom)];
    assert_eq!(cell.modifier.contains(Modifier::DIM), cell.fg != colors[band]);
}

#[test]
fn the_demo_recording_fills_the_chart_at_120_by_36() {
    utc();
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/demo.xtop");
    let rec = crate::recording::read_files(&[path]).unwrap();
    let mut a = App::new(rec.session, &UiOptions::default(), false, false);
    a.start_replay(&rec.snapshots);
    for s in rec.snapshots {
        a.push(s);
    }
    a.loading = None;
    let (w, h) = (120, 36);
    let (cols, page) = render::geometry(w, h);
    a.prepare(cols, page, None);
    let screen = super::tests::drawn(&a, w, h);
    assert!(screen.contains("(1m) · 372 samples in 60 snapshots"), "{screen}");
    let chart = &a.view().chart;
    assert_eq!(chart.cols.len(), (w - AXIS_W) as usize);
    assert!(
        chart
            .cols
            .iter()
            .all(|c| c.as_ref().is_some_and(|v| v.iter().sum::<f64>() > 0.0)),
        "every column has data:\n{screen}"
    );
    let lines: Vec<&str> = screen.lines().collect();
    let bottom = lines[(HEADER_H + chart_height(h) - 3) as usize];
    assert!(bottom.starts_with("    0┤"), "{screen}");
    assert!(
        bottom[bottom.find('┤').unwrap() + '┤'.len_utf8()..]
            .chars()
            .all(|c| c == '█'),
        "{screen}"
    );
    assert_eq!(bottom.chars().count(), w as usize, "to the right edge:\n{screen}");
}
