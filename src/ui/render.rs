//! Drawing: the parts every screen shares (header, footer, toasts, prompts,
//! colours, geometry) and the dispatch to each screen's module.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::model::{State, DEEPER, TRUNCATED};
use crate::value::{format_local_time, Value};

use super::app::{App, Overlay, PromptKind};
use super::keys;
use super::{help, main_view, picker, stack_view, thread_view};

pub const MIN_W: u16 = 40;
pub const MIN_H: u16 = 10;
/// Width of the chart's y-axis labels.
pub const AXIS_W: u16 = 6;
pub const HEADER_H: u16 = 2;
pub const FOOTER_H: u16 = 2;

/// Chart height for a screen `h` rows tall, including its legend row.
pub fn chart_height(h: u16) -> u16 {
    ((h.saturating_sub(HEADER_H + FOOTER_H)) * 2 / 5).clamp(3, 14)
}

/// (chart columns, table rows per page) for a `w`×`h` screen: what
/// `App::prepare` needs before drawing.
pub fn geometry(w: u16, h: u16) -> (usize, usize) {
    let cols = w.saturating_sub(AXIS_W) as usize;
    let body = h.saturating_sub(HEADER_H + FOOTER_H + chart_height(h) + 1);
    (cols.max(1), body.max(1) as usize)
}

pub fn draw(f: &mut Frame, app: &App) {
    let area = f.area();
    if area.width < MIN_W || area.height < MIN_H {
        let msg = format!(
            "terminal too small: {}×{} (need {MIN_W}×{MIN_H})",
            area.width, area.height
        );
        f.render_widget(
            Paragraph::new(msg).wrap(ratatui::widgets::Wrap { trim: true }),
            area,
        );
        return;
    }
    let header = Rect {
        height: HEADER_H,
        ..area
    };
    let footer = Rect {
        y: area.bottom() - FOOTER_H,
        height: FOOTER_H,
        ..area
    };
    let body = Rect {
        y: area.y + HEADER_H,
        height: area.height - HEADER_H - FOOTER_H,
        ..area
    };
    draw_header(f, header, app);
    if app.history.is_empty() {
        let msg = if app.loading.is_some() {
            "loading…"
        } else {
            "waiting for the first snapshot…"
        };
        f.render_widget(Paragraph::new(msg), body);
    } else if app.stacks.is_some() {
        stack_view::draw(f, body, app);
    } else if app.pinned_tid().is_some() {
        thread_view::draw(f, body, app);
    } else {
        main_view::draw(f, body, app);
    }
    draw_footer(f, footer, app);
    if let Some(t) = &app.toast {
        let line = Rect {
            y: footer.y - 1,
            height: 1,
            ..area
        };
        let style = if t.error {
            Style::new().fg(Color::White).bg(Color::Red)
        } else {
            Style::new().fg(Color::Black).bg(Color::Cyan)
        };
        f.render_widget(ratatui::widgets::Clear, line);
        f.render_widget(Paragraph::new(format!(" {} ", t.text)).style(style), line);
    }
    match &app.overlay {
        Overlay::Help(scroll) => help::draw(f, area, app, *scroll),
        Overlay::Picker(p) => picker::draw(f, body, p),
        _ => {}
    }
}

/// `HH:MM:SS` local time.
pub fn clock(ns: u64) -> String {
    format_local_time(ns).get(11..19).unwrap_or("?").to_string()
}

pub fn human_span(secs: u64) -> String {
    match secs {
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

fn draw_header(f: &mut Frame, area: Rect, app: &App) {
    let s = &app.session;
    let (mode, colour) = if !app.live {
        ("REPLAY", Color::Cyan)
    } else if app.paused() {
        ("PAUSED", Color::Yellow)
    } else {
        ("LIVE", Color::Green)
    };
    let bold = Style::new().add_modifier(Modifier::BOLD);
    // The mode first: on a narrow screen it is what must not be cut off.
    let mut l1 = vec![
        Span::styled("xtop ", bold),
        Span::styled(
            mode,
            Style::new()
                .fg(Color::Black)
                .bg(colour)
                .add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!(
            " {} · {} · {} CPUs · every {}",
            s.host,
            s.kernel,
            s.ncpus,
            humantime::format_duration(s.interval)
        )),
    ];
    if app.source_ended {
        l1.push(Span::styled(" sampler stopped", Style::new().fg(Color::Red)));
    }
    let mut l2 = Vec::new();
    if let Some(win) = app.window() {
        let h = &app.history;
        let (mut cpu_ns, mut secs) = (0u64, 0f64);
        for i in win.lo..win.hi {
            cpu_ns += h.meta(i).cost.cpu_ns;
            secs += h.meta(i).interval.as_secs_f64();
        }
        let dropped = win
            .hi
            .checked_sub(1)
            .filter(|&i| i >= win.lo)
            .map_or(0, |i| h.meta(i).dropped);
        let samples = if let Some(sv) = &app.stacks {
            sv.tree.total()
        } else if app.pinned_tid().is_some() {
            app.thread.samples.len() as u64
        } else {
            app.view().agg.total_samples
        };
        let cpu = if secs > 0.0 {
            format!("{:.1}%", cpu_ns as f64 / 1e9 / secs * 100.0)
        } else {
            "-".into()
        };
        l2.push(Span::raw(format!(
            "{}–{} ({}) · {} samples in {} snapshots · xtop CPU {} · dropped {}",
            clock(win.start_ns),
            clock(win.end_ns),
            human_span(app.span.as_secs()),
            samples,
            win.hi - win.lo,
            cpu,
            dropped
        )));
        if dropped > 0 {
            l2.last_mut().expect("pushed above").style = Style::new().fg(Color::Yellow);
        }
    }
    let v = app.view();
    if !v.complete() && app.pinned_tid().is_none() && app.stacks.is_none() {
        let pct = 100 * v.scanned / v.snapshots.max(1);
        l2.push(Span::styled(
            format!(" · grouping {pct}%"),
            Style::new().fg(Color::Yellow),
        ));
    }
    if let Some((done, total)) = app.loading {
        l2.push(Span::styled(
            format!(" · loading {done}/{total}"),
            Style::new().fg(Color::Yellow),
        ));
    }
    f.render_widget(Paragraph::new(vec![Line::from(l1), Line::from(l2)]), area);
}

fn draw_footer(f: &mut Frame, area: Rect, app: &App) {
    let top = Rect { height: 1, ..area };
    let bottom = Rect {
        y: area.y + 1,
        height: 1,
        ..area
    };
    let crumb = if let Overlay::Prompt(p) = &app.overlay {
        let lead = match p.kind {
            PromptKind::Search => "search: ",
            PromptKind::Filter => "filter: ",
        };
        let mut spans = vec![
            Span::styled(lead, Style::new().fg(Color::Yellow)),
            Span::raw(p.text.clone()),
            Span::raw("█"),
        ];
        if let Some(e) = &p.error {
            spans.push(Span::styled(format!("  {e}"), Style::new().fg(Color::Red)));
        } else if p.kind == PromptKind::Filter && p.text.is_empty() {
            spans.push(Span::styled(
                " dim=value, dim!=value or dim~text",
                Style::new().fg(Color::DarkGray),
            ));
        }
        Line::from(spans)
    } else {
        breadcrumb(app)
    };
    f.render_widget(Paragraph::new(crumb), top);
    let key_style = Style::new().fg(Color::Black).bg(Color::Gray);
    let mut spans = Vec::new();
    for (k, what) in keys::footer(app.mode(), app.live) {
        spans.push(Span::styled(k, key_style));
        spans.push(Span::raw(format!(" {what} ")));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), bottom);
}

fn breadcrumb(app: &App) -> Line<'static> {
    // The stack view says how far its user stacks reach, and what its gaps mean.
    if let Some((sv, reach)) = app
        .stacks
        .as_ref()
        .and_then(|sv| Some((sv, sv.tree.reach.summary()?)))
    {
        let r = &sv.tree.reach;
        let gaps = [(r.truncated > 0, TRUNCATED), (r.deeper > 0, DEEPER)]
            .into_iter()
            .filter(|g| g.0)
            .filter_map(|(_, gap)| Some(format!("{gap}: {}", stack_view::gap_hint(gap)?)));
        let text: Vec<String> = std::iter::once(reach).chain(gaps).collect();
        return Line::styled(text.join("  "), Style::new().fg(Color::DarkGray));
    }
    let filters: Vec<String> = app.level.query.filters.iter().map(ToString::to_string).collect();
    let mut spans = vec![Span::styled("filters: ", Style::new().fg(Color::DarkGray))];
    spans.push(Span::raw(if filters.is_empty() {
        "none".to_string()
    } else {
        filters.join(" › ")
    }));
    if !app.level.search.is_empty() {
        spans.push(Span::styled("  search: ", Style::new().fg(Color::DarkGray)));
        spans.push(Span::raw(app.level.search.clone()));
    }
    Line::from(spans)
}

/// Fixed colours for thread states, ASH-style: CPU green, waiting for CPU
/// light green, I/O blue.
pub fn state_color(s: State) -> Color {
    match s {
        State::Run => Color::Green,
        State::Runq => Color::LightGreen,
        State::Disk => Color::Blue,
        State::Sleep => Color::Gray,
        State::Stopped => Color::Magenta,
        State::Traced => Color::LightMagenta,
        State::Zombie | State::Dead => Color::Red,
        State::Parked => Color::DarkGray,
        State::Idle => Color::DarkGray,
    }
}

const PALETTE: &[Color] = &[
    Color::Cyan,
    Color::Yellow,
    Color::Magenta,
    Color::LightBlue,
    Color::LightRed,
    Color::LightGreen,
    Color::LightMagenta,
    Color::LightCyan,
    Color::Blue,
    Color::Green,
];

/// A colour per chart band that stays the same for the same value from frame
/// to frame (hash of the value), and differs between the bands shown.
pub fn band_colors(bands: &[Value], other: bool) -> Vec<Color> {
    let mut used: Vec<Color> = Vec::new();
    for v in bands {
        let by_state = match v {
            Value::Name(n) => State::from_name(n).map(state_color),
            _ => None,
        };
        let c = by_state.unwrap_or_else(|| {
            let h = v.to_string().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
            });
            let start = (h % PALETTE.len() as u64) as usize;
            (0..PALETTE.len())
                .map(|i| PALETTE[(start + i) % PALETTE.len()])
                .find(|c| !used.contains(c))
                .unwrap_or(PALETTE[start])
        });
        used.push(c);
    }
    if other {
        used.push(Color::DarkGray);
    }
    used
}

/// `s` cut to `max` characters, the cut marked with an ellipsis.
pub fn ellipsize(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    if max > 0 {
        out.push('…');
    }
    out
}

/// Scrolls so `selected` is inside `visible` rows starting near `offset`.
pub fn visible_offset(selected: usize, offset: usize, visible: usize) -> usize {
    if visible == 0 {
        return selected;
    }
    if selected < offset {
        selected
    } else if selected >= offset + visible {
        selected + 1 - visible
    } else {
        offset
    }
}

/// What the chart and the thread timeline draw where no snapshot stands for
/// the time: unlike a blank column (zero active threads), it says "unknown".
pub const NO_DATA: &str = "░";

pub fn no_data_style() -> Style {
    Style::new().fg(Color::DarkGray)
}

pub fn selected_style() -> Style {
    Style::new().add_modifier(Modifier::REVERSED)
}
