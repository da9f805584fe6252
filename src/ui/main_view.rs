//! The main view: the ASH chart over the window and the top-groups table.

use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row, Table};
use ratatui::Frame;

use super::app::App;
use super::chart::{legend, AshChart};
use super::render::{band_colors, chart_height, ellipsize, selected_style, visible_offset};
use super::view::SPARK_W;

/// Widest group column but the last; longer values end in an ellipsis.
const MAX_COL_W: usize = 40;
const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// A sparkline scaled to its own peak (its shape, not its size: the size is
/// in avg_threads); blank where the group had no samples.
pub fn sparkline(values: &[f32]) -> String {
    let max = values.iter().copied().fold(0.0, f32::max);
    values
        .iter()
        .map(|&v| {
            if v <= 0.0 || max <= 0.0 {
                ' '
            } else {
                BARS[((v / max * 7.0).round() as usize).min(7)]
            }
        })
        .collect()
}

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let view = app.view();
    let ch = chart_height(area.height + super::render::HEADER_H + super::render::FOOTER_H).min(area.height);
    let chart_area = Rect {
        height: ch - 1,
        ..area
    };
    let legend_area = Rect {
        y: area.y + ch - 1,
        height: 1,
        ..area
    };
    let table_area = Rect {
        y: area.y + ch,
        height: area.height - ch,
        ..area
    };

    let colors = band_colors(&view.chart.bands, view.chart.other);
    let mut names: Vec<String> = view.chart.bands.iter().map(ToString::to_string).collect();
    if view.chart.other {
        names.push("other".into());
    }
    // The selected row's band: its first value's, or "other" if that is folded.
    let selected = app
        .rows()
        .get(app.level.selected)
        .and_then(|&gi| view.agg.groups[gi].key.first())
        .and_then(|v| view.chart.band_of(v));
    f.render_widget(
        AshChart {
            chart: &view.chart,
            colors: &colors,
            ncpus: app.session.ncpus,
            selected,
        },
        chart_area,
    );
    let gaps = view.chart.cols.iter().any(Option::is_none);
    f.render_widget(
        legend(&names, &colors, app.session.ncpus, selected, gaps),
        legend_area,
    );

    let dims = &app.level.query.dims;
    let sort = app.level.sort;
    let arrow = |col: usize| -> &'static str {
        // avg_threads sorts largest first, dimensions A to Z, unless inverted.
        match (sort.col == col, (col == 0) != sort.reverse) {
            (false, _) => "",
            (true, true) => "▼",
            (true, false) => "▲",
        }
    };
    let mut header = vec![
        Cell::from(format!("avg_thr{}", arrow(0))),
        Cell::from("%"),
        Cell::from("activity"),
    ];
    header.extend(
        dims.iter()
            .enumerate()
            .map(|(i, d)| Cell::from(format!("{}{}", d.name, arrow(i + 1)))),
    );

    let rows = app.rows();
    let visible = table_area.height.saturating_sub(1) as usize;
    let offset = visible_offset(app.level.selected, app.level.offset, visible);
    let groups = &view.agg.groups;
    let shown = rows.iter().enumerate().skip(offset).take(visible);
    let mut widths: Vec<usize> = dims
        .iter()
        .enumerate()
        .map(|(i, d)| d.name.len() + arrow(i + 1).len().min(1))
        .collect();
    let texts: Vec<(usize, usize, Vec<String>)> = shown
        .map(|(n, &gi)| (n, gi, groups[gi].key.iter().map(ToString::to_string).collect()))
        .collect();
    for (_, _, t) in &texts {
        for (w, s) in widths.iter_mut().zip(t) {
            *w = (*w).max(s.chars().count());
        }
    }
    // Long values (stacks) end in an ellipsis: the last column gets what the
    // others leave, the others at most MAX_COL_W.
    let last = widths.len().saturating_sub(1);
    let used: usize = 8
        + 5
        + SPARK_W
        + 3
        + widths[..last]
            .iter()
            .map(|&w| w.min(MAX_COL_W) + 1)
            .sum::<usize>();
    let last_w = (table_area.width as usize).saturating_sub(used);
    let mut body = Vec::new();
    for (n, gi, text) in texts {
        let g = &groups[gi];
        let mut cells = vec![
            Cell::from(Line::from(format!("{:.2}", g.avg_threads(&view.agg))).right_aligned()),
            Cell::from(Line::from(format!("{:.1}", g.percent(&view.agg))).right_aligned()),
            Cell::from(sparkline(&view.spark[gi])).style(Style::new().fg(Color::Cyan)),
        ];
        for (i, (s, d)) in text.into_iter().zip(dims).enumerate() {
            let s = ellipsize(&s, if i == last { last_w } else { MAX_COL_W });
            let line = if d.numeric {
                Line::from(s).right_aligned()
            } else {
                Line::from(s)
            };
            cells.push(Cell::from(line));
        }
        let row = Row::new(cells);
        body.push(if n == app.level.selected {
            row.style(selected_style())
        } else {
            row
        });
    }
    let mut constraints = vec![
        Constraint::Length(8),
        Constraint::Length(5),
        Constraint::Length(SPARK_W as u16),
    ];
    constraints.extend(widths.iter().enumerate().map(|(i, &w)| {
        if i == last {
            Constraint::Fill(1)
        } else {
            Constraint::Length(w.min(MAX_COL_W) as u16)
        }
    }));
    let table = Table::new(body, constraints)
        .header(Row::new(header).style(Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)))
        .column_spacing(1);
    f.render_widget(table, table_area);
    if rows.is_empty() && table_area.height > 1 {
        let msg = if view.agg.total_samples == 0 {
            "no samples match in this window"
        } else {
            "no rows match the search"
        };
        let line = Rect {
            y: table_area.y + 1,
            height: 1,
            ..table_area
        };
        f.render_widget(Paragraph::new(msg).style(Style::new().fg(Color::DarkGray)), line);
    }
}
