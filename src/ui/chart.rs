//! The ASH chart: average active threads over time, stacked by the values of
//! the first group-by dimension, with a line at the CPU count so "more
//! runnable threads than CPUs" is visible at a glance, a time axis below, and
//! the selected row's band picked out.
//!
//! Every column is one cell and an equal span of the window (`timeline`), so
//! the data fills the width; a column no snapshot stands for is hatched, so a
//! stall is never mistaken for an idle box.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use crate::value::local_utc_offset;

use super::render::{clock, no_data_style, AXIS_W, NO_DATA};
use super::timeline::Columns;
use super::view::Chart;

const EIGHTHS: [&str; 9] = [" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"];
/// Tick steps of the time axis, in seconds: round clock times.
const TICK_STEPS: &[u64] = &[
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
];
/// Cells per tick label at least (`╵HH:MM:SS` and some room).
const TICK_ROOM: u16 = 12;

pub struct AshChart<'a> {
    pub chart: &'a Chart,
    pub colors: &'a [Color],
    pub ncpus: u32,
    /// The band of the table's selected row: the others are dimmed.
    pub selected: Option<usize>,
}

fn label(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Round clock times inside `(start, end]` for a time axis `width` cells
/// wide: as many as fit with room for their labels.
pub fn ticks(start_ns: u64, end_ns: u64, width: u16) -> Vec<u64> {
    let span_s = end_ns.saturating_sub(start_ns) / 1_000_000_000;
    let most = (width / TICK_ROOM).max(1) as u64;
    let step = TICK_STEPS
        .iter()
        .copied()
        .find(|&s| span_s / s <= most)
        .unwrap_or(86400);
    let step_ns = step * 1_000_000_000;
    // Ticks on the local clock's round times (zones half an hour off UTC too).
    let off = local_utc_offset(end_ns) as i128 * 1_000_000_000;
    let local = start_ns as i128 + off;
    let mut t = (local.div_euclid(step_ns as i128) + 1) * step_ns as i128 - off;
    let mut out = Vec::new();
    while t <= end_ns as i128 {
        if t > start_ns as i128 {
            out.push(t as u64);
        }
        t += step_ns as i128;
    }
    out
}

impl AshChart<'_> {
    /// The bottom row: the window's ends and round times between them.
    fn axis(&self, buf: &mut Buffer, x0: u16, y: u16, width: u16) {
        let style = Style::new().fg(Color::DarkGray);
        let (start, end) = (clock(self.chart.start_ns), clock(self.chart.end_ns));
        let right = x0 + width;
        let mut taken: Vec<(u16, u16)> = Vec::new();
        let mut put = |buf: &mut Buffer, x: u16, text: &str| {
            let w = text.chars().count() as u16;
            let free = x + w <= right && taken.iter().all(|&(a, b)| x + w < a || x > b);
            if free {
                buf.set_string(x, y, text, style);
                taken.push((x, x + w));
            }
        };
        put(buf, x0, &start);
        put(buf, right.saturating_sub(end.len() as u16).max(x0), &end);
        let columns = Columns::new(self.chart.start_ns, self.chart.end_ns, width as usize);
        for t in ticks(self.chart.start_ns, self.chart.end_ns, width) {
            put(buf, x0 + columns.column_of(t) as u16, &format!("╵{}", clock(t)));
        }
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
        self.axis(buf, x0, area.bottom() - 1, area.right() - x0);
        let dimmed = |band: Option<usize>| self.selected.is_some() && band != self.selected && band.is_some();
        for (c, col) in self.chart.cols.iter().enumerate() {
            let x = x0 + c as u16;
            if x >= area.right() {
                break;
            }
            let Some(col) = col else {
                for r in 0..body_h {
                    let cell = &mut buf[(x, area.y + body_h - 1 - r)];
                    if r == cpu_row {
                        cell.set_symbol("╌").set_fg(Color::White);
                    } else {
                        cell.set_symbol(NO_DATA).set_style(no_data_style());
                    }
                }
                continue;
            };
            let cells: Vec<f64> = col.iter().map(|t| t / unit).collect();
            let total: f64 = cells.iter().sum();
            let top_band = cells.iter().rposition(|&v| v > 0.0);
            for r in 0..body_h {
                let y = area.y + body_h - 1 - r;
                let cell = &mut buf[(x, y)];
                let (lo, mid) = (r as f64, r as f64 + 0.5);
                if total >= lo + 1.0 {
                    // The band at the cell's midpoint colours the whole cell.
                    let mut acc = 0.0;
                    let band = cells
                        .iter()
                        .position(|v| {
                            acc += v;
                            acc > mid
                        })
                        .or(top_band);
                    let colour = band.map_or(Color::Reset, |b| self.colors[b]);
                    cell.set_symbol("█").set_fg(colour);
                    if r == cpu_row {
                        cell.set_symbol("─").set_fg(Color::White).set_bg(colour);
                    }
                    if dimmed(band) {
                        cell.modifier.insert(Modifier::DIM);
                    }
                } else if total > lo && ((total - lo) * 8.0).round() > 0.0 {
                    let eighths = ((total - lo) * 8.0).round() as usize;
                    let colour = top_band.map_or(Color::Reset, |b| self.colors[b]);
                    cell.set_symbol(EIGHTHS[eighths.min(8)]).set_fg(colour);
                    if dimmed(top_band) {
                        cell.modifier.insert(Modifier::DIM);
                    }
                } else if r == cpu_row {
                    cell.set_symbol("╌").set_fg(Color::White);
                }
            }
        }
    }
}

/// `■ RUN ■ RUNQ … ╌ 2 CPUs ░ no data`: which colour is which band, the
/// selected row's band reversed.
pub fn legend(
    names: &[String],
    colors: &[Color],
    ncpus: u32,
    selected: Option<usize>,
    gaps: bool,
) -> Paragraph<'static> {
    let mut spans = vec![Span::raw(" ".repeat(AXIS_W as usize))];
    for (i, (n, c)) in names.iter().zip(colors).enumerate() {
        spans.push(Span::styled("■ ", Style::new().fg(*c)));
        let style = if selected == Some(i) {
            Style::new().add_modifier(Modifier::REVERSED)
        } else {
            Style::new()
        };
        spans.push(Span::styled(n.clone(), style));
        spans.push(Span::raw("  "));
    }
    spans.push(Span::styled("╌ ", Style::new().fg(Color::White)));
    spans.push(Span::raw(format!("{ncpus} CPUs")));
    if gaps {
        spans.push(Span::styled(format!("  {NO_DATA} "), no_data_style()));
        spans.push(Span::raw("no snapshot"));
    }
    Paragraph::new(Line::from(spans))
}
