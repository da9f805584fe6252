//! The ASH chart: average active threads over time, stacked by the values of
//! the first group-by dimension, with a line at the CPU count so "more
//! runnable threads than CPUs" is visible at a glance.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::render::{stretch, AXIS_W};
use super::view::Chart;

const EIGHTHS: [&str; 9] = [" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"];

pub struct AshChart<'a> {
    pub chart: &'a Chart,
    pub colors: &'a [Color],
    pub ncpus: u32,
}

fn label(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

impl Widget for AshChart<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.height < 2 || area.width <= AXIS_W {
            return;
        }
        let body_h = area.height - 1;
        let ncpus = self.ncpus as f64;
        // Headroom: the CPU line stays below the top row, where the scale is labelled.
        let room = if body_h > 1 {
            body_h as f64 / (body_h as f64 - 1.0) * 1.01
        } else {
            1.1
        };
        let ymax = (self.chart.max_total() * 1.1).max(ncpus * room).max(1.0);
        let unit = ymax / body_h as f64;
        let cpu_row = ((ncpus / unit) as u16).min(body_h - 1);
        let axis = Style::new().fg(Color::DarkGray);
        let x0 = area.x + AXIS_W;
        for r in 0..body_h {
            let y = area.y + body_h - 1 - r;
            let text = if r == body_h - 1 {
                label(ymax)
            } else if r == cpu_row && ncpus > 0.0 {
                format!("{}cpu", self.ncpus)
            } else if r == 0 {
                "0".into()
            } else {
                String::new()
            };
            buf.set_string(area.x, y, format!("{text:>w$}┤", w = AXIS_W as usize - 1), axis);
        }
        let (cw, pad) = stretch(self.chart.cols.len(), area.right() - x0);
        let line_y = area.y + body_h - 1 - cpu_row;
        // Slots before the first snapshot still show where the CPU line is.
        for x in x0..x0 + pad {
            buf[(x, line_y)].set_symbol("╌").set_fg(Color::White);
        }
        for (c, col) in self.chart.cols.iter().enumerate() {
            let cells: Vec<f64> = col
                .as_ref()
                .map_or_else(Vec::new, |v| v.iter().map(|t| t / unit).collect());
            let total: f64 = cells.iter().sum();
            let top_band = cells.iter().rposition(|&v| v > 0.0);
            for x in (0..cw)
                .map(|i| x0 + pad + c as u16 * cw + i)
                .filter(|&x| x < area.right())
            {
                for r in 0..body_h {
                    let y = area.y + body_h - 1 - r;
                    let cell = &mut buf[(x, y)];
                    let (lo, mid) = (r as f64, r as f64 + 0.5);
                    if total >= lo + 1.0 {
                        // The band at the cell's midpoint colours the whole cell.
                        let mut acc = 0.0;
                        let band = cells.iter().position(|v| {
                            acc += v;
                            acc > mid
                        });
                        let colour = band.or(top_band).map_or(Color::Reset, |b| self.colors[b]);
                        cell.set_symbol("█").set_fg(colour);
                        if r == cpu_row {
                            cell.set_symbol("─").set_fg(Color::White).set_bg(colour);
                        }
                    } else if total > lo && ((total - lo) * 8.0).round() > 0.0 {
                        let eighths = ((total - lo) * 8.0).round() as usize;
                        let colour = top_band.map_or(Color::Reset, |b| self.colors[b]);
                        cell.set_symbol(EIGHTHS[eighths.min(8)]).set_fg(colour);
                    } else if r == cpu_row {
                        cell.set_symbol("╌").set_fg(Color::White);
                    }
                }
            }
        }
    }
}

/// `■ RUN ■ RUNQ … ╌ 2 CPUs`: which colour is which band.
pub fn legend(names: &[String], colors: &[Color], ncpus: u32) -> Paragraph<'static> {
    let mut spans = vec![Span::raw(" ".repeat(AXIS_W as usize))];
    for (n, c) in names.iter().zip(colors) {
        spans.push(Span::styled("■ ", Style::new().fg(*c)));
        spans.push(Span::raw(format!("{n}  ")));
    }
    spans.push(Span::styled("╌ ", Style::new().fg(Color::White)));
    spans.push(Span::raw(format!("{ncpus} CPUs")));
    Paragraph::new(Line::from(spans))
}
