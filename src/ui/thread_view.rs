//! The thread view: one thread (the filters pin a tid) over the window: who it
//! is, its state over time, where it is now, and its samples.

use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};
use ratatui::Frame;

use crate::dimensions;
use crate::model::{State, Syscall};

use super::app::App;
use super::render::{selected_style, state_color, stretch, visible_offset, AXIS_W};

/// Columns of the samples table, by registry name.
const SAMPLE_COLUMNS: &[&str] = &[
    "state",
    "syscall",
    "sysc_ns_so_far",
    "kstack_top",
    "cpu",
    "switch",
    "waker_tid",
];

/// Nanoseconds as a short human duration.
pub fn human_ns(ns: u64) -> String {
    match ns {
        n if n >= 60_000_000_000 => {
            humantime::format_duration(std::time::Duration::from_secs(n / 1_000_000_000)).to_string()
        }
        n if n >= 1_000_000_000 => format!("{:.2}s", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.1}ms", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1}µs", n as f64 / 1e3),
        n => format!("{n}ns"),
    }
}

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.thread;
    let dim = Style::new().fg(Color::DarkGray);
    let Some((_, last)) = t.samples.first() else {
        let msg = format!(
            "thread {} has no samples in this window (move it with [ ] or widen it with +)",
            t.tid
        );
        f.render_widget(Paragraph::new(msg), area);
        return;
    };
    let arch = app.session.arch;
    let mut lines = vec![
        Line::from(vec![
            Span::styled("tid ", dim),
            Span::styled(last.tid.to_string(), Style::new().add_modifier(Modifier::BOLD)),
            Span::styled("  pid ", dim),
            Span::raw(last.tgid.to_string()),
            Span::styled("  comm ", dim),
            Span::raw(last.comm.to_string()),
            Span::styled("  user ", dim),
            Span::raw(format!("{} ({})", last.user, last.uid)),
            Span::styled("  cgroup ", dim),
            Span::raw(last.cgroup.to_string()),
        ]),
        Line::from(vec![
            Span::styled("exe ", dim),
            Span::raw(if last.process.exe.is_empty() {
                "-".to_string()
            } else {
                last.process.exe.to_string()
            }),
            Span::styled("  cmdline ", dim),
            Span::raw(if last.process.cmdline.is_empty() {
                "-".to_string()
            } else {
                last.process.cmdline.to_string()
            }),
        ]),
    ];
    // Timeline: one cell per chart column, coloured by the thread's state there.
    let (cw, pad) = stretch(t.timeline.len(), area.width.saturating_sub(AXIS_W));
    let mut tl = vec![Span::styled(
        format!(
            "{:>w$}┤{}",
            "state",
            " ".repeat(pad as usize),
            w = AXIS_W as usize - 1
        ),
        dim,
    )];
    for s in &t.timeline {
        let cells = "█".repeat(cw as usize);
        tl.push(match s {
            Some(s) => Span::styled(cells, Style::new().fg(state_color(*s))),
            None => Span::styled("·".repeat(cw as usize), dim),
        });
    }
    lines.push(Line::from(tl));
    let mut seen: Vec<State> = t.timeline.iter().flatten().copied().collect();
    seen.sort();
    seen.dedup();
    let mut leg = vec![Span::raw(" ".repeat(AXIS_W as usize))];
    for s in seen {
        leg.push(Span::styled("■ ", Style::new().fg(state_color(s))));
        leg.push(Span::raw(format!("{s}  ")));
    }
    leg.push(Span::styled("· not sampled (inactive or absent)", dim));
    lines.push(Line::from(leg));
    let now = match last.syscall {
        Syscall::In {
            args, ns_so_far, seq, ..
        } => {
            let name = last.syscall_name(arch).unwrap_or_default();
            let time = ns_so_far.map_or("time in it unknown (began before tracking)".into(), |ns| {
                format!("for {}", human_ns(ns))
            });
            let seq = seq.map_or(String::new(), |s| format!(", syscall #{s}"));
            format!("{} {time}{seq}", super::syscall_args::format_call(&name, &args))
        }
        Syscall::None => "not in a system call".into(),
        Syscall::Unknown => "unknown (running, syscalls not tracked)".into(),
    };
    lines.push(Line::from(vec![
        Span::styled("now ", dim),
        Span::styled(
            format!("{} ", last.state),
            Style::new()
                .fg(state_color(last.state))
                .add_modifier(Modifier::BOLD),
        ),
        Span::raw(now),
    ]));
    let stack = match &last.kstack {
        Some(k) => {
            let frames: Vec<String> = k
                .frames
                .iter()
                .enumerate()
                .map(|(i, fr)| {
                    if i == k.top {
                        format!("[{fr}]")
                    } else {
                        fr.to_string()
                    }
                })
                .collect();
            frames.join(" ← ")
        }
        None => "- (on CPU or not captured)".into(),
    };
    lines.push(Line::from(vec![Span::styled("kstack ", dim), Span::raw(stack)]));
    lines.push(Line::from(Span::styled(
        format!(
            "all {} samples of this thread in the window (newest first); other filters apply to export",
            t.samples.len()
        ),
        dim,
    )));
    let info_h = (lines.len() as u16).min(area.height);
    f.render_widget(
        Paragraph::new(lines),
        Rect {
            height: info_h,
            ..area
        },
    );

    let table_area = Rect {
        y: area.y + info_h,
        height: area.height - info_h,
        ..area
    };
    let cols: Vec<_> = SAMPLE_COLUMNS
        .iter()
        .map(|n| dimensions::find(n).expect("registry column"))
        .collect();
    let mut header = vec![Cell::from("time")];
    header.extend(cols.iter().map(|d| Cell::from(d.name)));
    let visible = table_area.height.saturating_sub(1) as usize;
    let offset = visible_offset(app.level.selected, app.level.offset, visible);
    let mut widths: Vec<usize> = cols.iter().map(|d| d.name.len()).collect();
    let mut rows = Vec::new();
    for (n, (time, s)) in t.samples.iter().enumerate().skip(offset).take(visible) {
        let i = app.history.index_after(*time).saturating_sub(1);
        let meta = app.history.meta(i);
        let mut cells = vec![Cell::from(super::render::clock(*time))];
        for (c, d) in cols.iter().enumerate() {
            let v = d.value(meta, s).to_string();
            widths[c] = widths[c].max(v.chars().count());
            let line = if d.numeric {
                Line::from(v).right_aligned()
            } else {
                Line::from(v)
            };
            cells.push(Cell::from(line).style(if d.name == "state" {
                Style::new().fg(state_color(s.state))
            } else {
                Style::new()
            }));
        }
        let row = Row::new(cells);
        rows.push(if n == app.level.selected {
            row.style(selected_style())
        } else {
            row
        });
    }
    let mut constraints = vec![Constraint::Length(8)];
    constraints.extend(widths.iter().map(|&w| Constraint::Length(w.min(32) as u16)));
    let table = Table::new(rows, constraints)
        .header(Row::new(header).style(Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)))
        .column_spacing(1);
    f.render_widget(table, table_area);
}
