//! The thread view: one thread (the filters pin a tid) over the window: who it
//! is, its state over time, where it is now, and its samples.

use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};
use ratatui::Frame;

use crate::dimensions;
use crate::model::{Reach, Stack, State, Syscall};

use super::app::{App, Slot};
use super::render::{ellipsize, no_data_style, selected_style, state_color, visible_offset, AXIS_W, NO_DATA};
use super::stack_view::gap_hint;

/// Widest sample column; longer values end in an ellipsis.
const MAX_COL_W: usize = 32;

/// Columns of the samples table, by registry name.
const SAMPLE_COLUMNS: &[&str] = &[
    "state",
    "syscall",
    "sysc_ns_so_far",
    "kstack_top",
    "ustack_app",
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

/// A stack on one line, leaf first (`←` points to callers); the top frame in
/// brackets (the kernel stack's wchan-like one, the user stack's own program
/// frame, `ustack_app`), a user stack's gap dimmed.
fn stack_line(label: &'static str, stack: Option<&Stack>, kernel: bool) -> Line<'static> {
    let dim = Style::new().fg(Color::DarkGray);
    let mut spans = vec![Span::styled(label, dim)];
    let Some(k) = stack.filter(|k| !k.frames.is_empty()) else {
        spans.push(Span::raw("- (not captured)"));
        return Line::from(spans);
    };
    for (i, fr) in k.frames.iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled(" ← ", dim));
        }
        if let Some(hint) = gap_hint(fr).filter(|_| !kernel) {
            spans.push(Span::styled(
                format!("{fr} ({hint})"),
                dim.add_modifier(Modifier::ITALIC),
            ));
        } else if i == k.top {
            spans.push(Span::raw(format!("[{fr}]")));
        } else {
            spans.push(Span::raw(fr.to_string()));
        }
    }
    Line::from(spans)
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
    let id = &last.ident;
    let mut lines = vec![
        Line::from(vec![
            Span::styled("tid ", dim),
            Span::styled(id.tid.to_string(), Style::new().add_modifier(Modifier::BOLD)),
            Span::styled("  pid ", dim),
            Span::raw(id.tgid.to_string()),
            Span::styled("  comm ", dim),
            Span::raw(id.comm.to_string()),
            Span::styled("  user ", dim),
            Span::raw(format!("{} ({})", id.user, id.uid)),
            Span::styled("  cgroup ", dim),
            Span::raw(id.cgroup.to_string()),
        ]),
        Line::from(vec![
            Span::styled("exe ", dim),
            Span::raw(if id.process.exe.is_empty() {
                "-".to_string()
            } else {
                id.process.exe.to_string()
            }),
            Span::styled("  cmdline ", dim),
            Span::raw(if id.process.cmdline.is_empty() {
                "-".to_string()
            } else {
                id.process.cmdline.to_string()
            }),
        ]),
    ];
    // Timeline: one cell per chart column, coloured by the thread's state there.
    let mut tl = vec![Span::styled(
        format!("{:>w$}┤", "state", w = AXIS_W as usize - 1),
        dim,
    )];
    for slot in &t.timeline {
        tl.push(match slot {
            Slot::In(s) => Span::styled("█", Style::new().fg(state_color(*s))),
            Slot::NotSampled => Span::styled("·", dim),
            Slot::NoData => Span::styled(NO_DATA, no_data_style()),
        });
    }
    lines.push(Line::from(tl));
    let mut seen: Vec<State> = t
        .timeline
        .iter()
        .filter_map(|s| match s {
            Slot::In(s) => Some(*s),
            _ => None,
        })
        .collect();
    seen.sort();
    seen.dedup();
    let mut leg = vec![Span::raw(" ".repeat(AXIS_W as usize))];
    for s in seen {
        leg.push(Span::styled("■ ", Style::new().fg(state_color(s))));
        leg.push(Span::raw(format!("{s}  ")));
    }
    leg.push(Span::styled("· not sampled (inactive or absent)", dim));
    if t.timeline.contains(&Slot::NoData) {
        leg.push(Span::styled(format!("  {NO_DATA}"), no_data_style()));
        leg.push(Span::styled(" no snapshot", dim));
    }
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
    // Stacks of the sample under the cursor (the newest until one is picked).
    let picked = t.samples.get(app.level.selected).map_or(last, |(_, s)| s);
    if let Some(snap) = app.history.latest() {
        // The file the picked sample's syscall works on, and what its socket
        // connects, as the registry names them.
        let value = |d: &str| dimensions::find(d).expect("registry column").value(snap, picked);
        let file = value("filename");
        if file != crate::value::Value::Missing {
            lines.push(Line::from(vec![
                Span::styled("file   ", dim),
                Span::raw(file.to_string()),
            ]));
        }
        let (conn, state) = (value("connection"), value("conn_state"));
        if conn != crate::value::Value::Missing {
            let state = match state {
                crate::value::Value::Missing => String::new(),
                s => format!("  {s}"),
            };
            lines.push(Line::from(vec![
                Span::styled("conn   ", dim),
                Span::raw(format!("{conn}{state}")),
            ]));
        }
        // What the program itself says it waits on (PostgreSQL's event).
        let (wait, kind) = (value("app_wait"), value("app_state"));
        if wait != crate::value::Value::Missing {
            lines.push(Line::from(vec![
                Span::styled("app    ", dim),
                Span::raw(format!("{wait}  ({kind})")),
            ]));
        }
    }
    lines.push(stack_line("kstack ", picked.kstack.as_deref(), true));
    lines.push(stack_line("ustack ", picked.ustack.as_deref(), false));
    let reach = Reach::of(t.samples.iter().map(|(_, s)| s))
        .summary()
        .map_or(String::new(), |r| format!(" · {r}"));
    lines.push(Line::from(Span::styled(
        format!(
            "{} samples, newest first{reach} · export applies every filter",
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
            let v = ellipsize(&d.value(meta, s).to_string(), MAX_COL_W);
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
    constraints.extend(
        widths
            .iter()
            .map(|&w| Constraint::Length(w.min(MAX_COL_W) as u16)),
    );
    let table = Table::new(rows, constraints)
        .header(Row::new(header).style(Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)))
        .column_spacing(1);
    f.render_widget(table, table_area);
}
