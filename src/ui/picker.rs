//! `g`: choose the group-by dimensions from the registry.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::Frame;

use crate::dimensions::DIMENSIONS;

use super::app::Picker;
use super::render::{selected_style, visible_offset};

pub fn draw(f: &mut Frame, area: Rect, p: &Picker) {
    f.render_widget(Clear, area);
    let chosen: Vec<&str> = p.chosen.iter().map(|d| d.name).collect();
    let title = format!(
        " group by: {} ",
        if chosen.is_empty() {
            "(none)".into()
        } else {
            chosen.join(", ")
        }
    );
    let block = Block::default().borders(Borders::ALL).title(title);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let visible = inner.height as usize;
    let offset = visible_offset(p.cursor, p.offset, visible);
    let name_w = DIMENSIONS.iter().map(|d| d.name.len()).max().unwrap_or(0);
    let lines: Vec<Line> = DIMENSIONS
        .iter()
        .enumerate()
        .skip(offset)
        .take(visible)
        .map(|(i, d)| {
            let pos = p.chosen.iter().position(|c| *c == d);
            let mark = pos.map_or("[ ]".to_string(), |n| format!("[{}]", n + 1));
            let line = Line::from(vec![
                Span::styled(format!("{mark} "), Style::new().fg(Color::Yellow)),
                Span::styled(
                    format!("{:<name_w$}  ", d.name),
                    Style::new().add_modifier(Modifier::BOLD),
                ),
                Span::styled(d.description, Style::new().fg(Color::Gray)),
            ]);
            if i == p.cursor {
                line.style(selected_style())
            } else {
                line
            }
        })
        .collect();
    f.render_widget(Paragraph::new(lines), inner);
}
