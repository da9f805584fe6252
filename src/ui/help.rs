//! `?`: every key, straight from the key table.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::Frame;

use super::app::App;
use super::keys;

pub fn lines(live: bool) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    for (title, list) in keys::help_sections(live) {
        if !out.is_empty() {
            out.push(Line::raw(""));
        }
        out.push(Line::styled(title, Style::new().add_modifier(Modifier::BOLD)));
        for b in list {
            out.push(Line::from(vec![
                Span::styled(format!("  {:<9}", b.label), Style::new().fg(Color::Yellow)),
                Span::raw(b.help),
            ]));
        }
    }
    let note = Style::new().fg(Color::DarkGray);
    out.push(Line::raw(""));
    for text in [
        "Stacks (s, f): the selection is the highlighted row's group over the window (the thread's",
        "samples in the thread view). Counts are samples; % is of the selection. [no stack]: samples",
        "without any stack. [truncated]: the user stack unwind stopped early, in code with neither",
        "CFI nor frame pointers. [deeper]: the stack goes on past the 16 KiB and 128 frames xtop",
        "copies of it. Frames above either gap are missing, not wrong. [signal]: the frames above it",
        "ran in a signal handler, the ones below were interrupted by the signal.",
    ] {
        out.push(Line::styled(text, note));
    }
    if !live {
        out.push(Line::raw(""));
        out.push(Line::styled(
            "Replay: pause and all-threads keys need a live sampler.",
            Style::new().fg(Color::DarkGray),
        ));
    }
    out
}

pub fn draw(f: &mut Frame, area: Rect, app: &App, scroll: usize) {
    let text = lines(app.live);
    let w = area.width.min(100);
    let h = area.height.saturating_sub(2).min(text.len() as u16 + 2);
    let r = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + 1,
        width: w,
        height: h.max(3),
    };
    let scroll = scroll.min(text.len().saturating_sub(r.height as usize - 2)) as u16;
    f.render_widget(Clear, r);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(" xtop keys (↑↓ scroll, Esc closes) ");
    f.render_widget(Paragraph::new(text).block(block).scroll((scroll, 0)), r);
}
