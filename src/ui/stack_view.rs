//! Draws the stack view: the selection's call tree, root to leaf, one row per
//! visible frame with its samples and share of the selection.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::app::App;
use super::render::{ellipsize, selected_style, visible_offset};
use super::stacks::StackView;
use crate::model::{DEEPER, TRUNCATED};

/// Count and percent columns, with their spacing.
const NUM_W: usize = 16;
/// Name width kept visible however deep the frame: indentation stops growing first.
const MIN_NAME_W: usize = 16;
pub const TRUNCATED_HINT: &str = "unwind failed: no CFI or frame pointer";
pub const DEEPER_HINT: &str = "the stack goes on past the 16 KiB/128 frames copied";

/// What a user stack's gap frame (`[truncated]`, `[deeper]`) means, shown next
/// to it; None for any other frame.
pub fn gap_hint(frame: &str) -> Option<&'static str> {
    match frame {
        TRUNCATED => Some(TRUNCATED_HINT),
        DEEPER => Some(DEEPER_HINT),
        _ => None,
    }
}

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let Some(sv) = &app.stacks else { return };
    let dim = Style::new().fg(Color::DarkGray);
    let mut title = vec![
        Span::styled("stacks of ", dim),
        Span::raw(sv.sel.describe()),
        Span::styled(format!(" · {} samples", sv.tree.total()), dim),
    ];

    if sv.pending() {
        title.push(Span::styled(
            format!(" · counting {}%", sv.progress()),
            Style::new().fg(Color::Yellow),
        ));
    }
    let mut lines = vec![
        Line::from(title),
        Line::styled(
            format!(
                "{:>8} {:>5}  call tree (root → leaf, user then kernel [k] frames)",
                "samples", "%"
            ),
            Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
        ),
    ];
    let visible = (area.height as usize).saturating_sub(lines.len());
    if sv.tree.total() == 0 && !sv.pending() {
        lines.push(Line::styled("no samples in the selection in this window", dim));
    }
    let offset = visible_offset(sv.selected, sv.offset, visible);
    for (n, &node) in sv.rows.iter().enumerate().skip(offset).take(visible) {
        lines.push(row(sv, node, n == sv.selected, area.width as usize));
    }
    f.render_widget(Paragraph::new(lines), area);
}

fn row(sv: &StackView, node: u32, selected: bool, width: usize) -> Line<'static> {
    let t = &sv.tree;
    let n = &t.nodes[node as usize];
    let room = width.saturating_sub(NUM_W);
    let indent = (2 * (n.depth as usize).saturating_sub(1)).min(room.saturating_sub(MIN_NAME_W + 2));
    let marker = match (n.children.is_empty(), sv.is_expanded(node)) {
        (true, _) => "  ",
        (false, true) => "▾ ",
        (false, false) => "▸ ",
    };
    let name_w = room.saturating_sub(indent + 2);
    let mut spans = vec![
        Span::raw(format!("{:>8} {:>5.1}  ", n.count, t.percent(node))),
        Span::raw(" ".repeat(indent)),
        Span::raw(marker),
    ];
    let dim = Style::new().fg(Color::DarkGray);
    if let Some(hint) = gap_hint(&n.name).filter(|_| !n.kernel) {
        spans.push(Span::styled(
            ellipsize(&format!("{} ({hint})", n.name), name_w),
            dim.add_modifier(Modifier::ITALIC),
        ));
    } else if n.no_stack() {
        spans.push(Span::styled(ellipsize(&n.name, name_w), dim));
    } else if n.kernel {
        let name = ellipsize(&n.name, name_w.saturating_sub(4));
        spans.push(Span::styled(name, Style::new().fg(Color::LightBlue)));
        spans.push(Span::styled(" [k]", dim));
    } else {
        spans.push(Span::raw(ellipsize(&n.name, name_w)));
    }
    let line = Line::from(spans);
    if selected {
        line.style(selected_style())
    } else {
        line
    }
}
