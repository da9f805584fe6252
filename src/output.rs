//! Text renderings shared by batch mode (`xtop -b`), `xtop report` and exports:
//! a psn-style aggregate table, CSV and JSON lines of samples. Columns always
//! come from the dimension registry.

use std::io::{self, Write};

use crate::aggregation::Aggregate;
use crate::dimensions::{Dimension, DIMENSIONS};
use crate::model::Snapshot;
use crate::value::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
}

/// `samples  avg_threads  %  <dims...>`, largest first.
pub fn write_table(out: &mut impl Write, agg: &Aggregate, dims: &[&Dimension]) -> io::Result<()> {
    let rows: Vec<Vec<String>> = agg
        .groups
        .iter()
        .map(|g| {
            let mut row = vec![
                g.samples.to_string(),
                format!("{:.2}", g.avg_threads(agg)),
                format!("{:.1}", g.percent(agg)),
            ];
            row.extend(g.key.iter().map(Value::to_string));
            row
        })
        .collect();
    let mut header = vec!["samples", "avg_threads", "%"];
    header.extend(dims.iter().map(|d| d.name));
    let numeric: Vec<bool> = [true, true, true]
        .into_iter()
        .chain(dims.iter().map(|d| d.numeric))
        .collect();
    let widths: Vec<usize> = header
        .iter()
        .enumerate()
        .map(|(i, h)| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([h.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let last = header.len() - 1;
    let line = |out: &mut dyn Write, cells: &[&str]| -> io::Result<()> {
        for (i, c) in cells.iter().enumerate() {
            let sep = if i == 0 { "" } else { "  " };
            if i == last && !numeric[i] {
                write!(out, "{sep}{c}")?; // no trailing padding
            } else if numeric[i] {
                write!(out, "{sep}{c:>w$}", w = widths[i])?;
            } else {
                write!(out, "{sep}{c:<w$}", w = widths[i])?;
            }
        }
        writeln!(out)
    };
    line(out, &header)?;
    for r in &rows {
        line(out, &r.iter().map(String::as_str).collect::<Vec<_>>())?;
    }
    Ok(())
}

/// Quotes a CSV field only when it needs it (RFC 4180).
pub fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

pub fn write_csv_header(out: &mut impl Write) -> io::Result<()> {
    let names: Vec<String> = DIMENSIONS.iter().map(Dimension::csv_name).collect();
    writeln!(out, "{}", names.join(","))
}

/// One CSV row per thread sample, every registry column; unknown values are empty.
pub fn write_csv_rows(out: &mut impl Write, snap: &Snapshot) -> io::Result<()> {
    let mut line = String::new();
    for s in &snap.samples {
        line.clear();
        for (i, d) in DIMENSIONS.iter().enumerate() {
            if i > 0 {
                line.push(',');
            }
            line.push_str(&csv_field(&d.value(snap, s).plain()));
        }
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// JSON value of a dimension: numbers as numbers, unknown/missing as null.
pub fn json_value(v: &Value) -> serde_json::Value {
    match v {
        Value::Missing | Value::Unknown => serde_json::Value::Null,
        Value::Int(i) => (*i).into(),
        other => other.to_string().into(),
    }
}

/// One JSON object per thread sample (JSON lines), every registry column in registry order.
pub fn write_json_rows(out: &mut impl Write, snap: &Snapshot) -> io::Result<()> {
    let mut line = String::new();
    for s in &snap.samples {
        line.clear();
        for (i, d) in DIMENSIONS.iter().enumerate() {
            line.push(if i == 0 { '{' } else { ',' });
            line.push_str(&format!("\"{}\":{}", d.name, json_value(&d.value(snap, s))));
        }
        line.push('}');
        writeln!(out, "{line}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregation::aggregate;
    use crate::dimensions::parse_list;
    use crate::model::fixture::busy_snapshot;

    #[test]
    fn table_is_aligned_and_sorted() {
        let snaps: Vec<_> = (0..2).map(busy_snapshot).collect();
        let dims = parse_list("state,comm").unwrap();
        let mut out = Vec::new();
        write_table(&mut out, &aggregate(&snaps, &dims, &[]), &dims).unwrap();
        let text = String::from_utf8(out).unwrap();
        let want = "\
samples  avg_threads     %  state  comm
      2         1.00  18.2  DISK   postgres
      2         1.00  18.2  RUN    java
      2         1.00  18.2  RUN    postgres
      2         1.00  18.2  RUNQ   postgres
      2         1.00  18.2  SLEEP  java
      1         0.50   9.1  DISK   dd
";
        assert_eq!(text, want);
    }

    #[test]
    fn csv_has_registry_header_and_one_row_per_sample() {
        let snap = busy_snapshot(0);
        let mut out = Vec::new();
        write_csv_header(&mut out).unwrap();
        write_csv_rows(&mut out, &snap).unwrap();
        let text = String::from_utf8(out).unwrap();
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert_eq!(&header[..3], ["TIMESTAMP", "TID", "TGID"]);
        assert_eq!(lines.clone().count(), snap.samples.len());
        let state = header.iter().position(|h| *h == "STATE").unwrap();
        let syscall = header.iter().position(|h| *h == "SYSCALL").unwrap();
        let row: Vec<&str> = lines.nth(1).unwrap().split(',').collect();
        assert_eq!(row.len(), header.len());
        assert_eq!((row[state], row[syscall]), ("DISK", "pread64"));
        assert_eq!(csv_field("a,\"b\""), "\"a,\"\"b\"\"\"");
    }

    #[test]
    fn json_lines_use_null_for_unknown() {
        let mut snap = busy_snapshot(0);
        snap.samples.truncate(1);
        snap.samples[0].since_offcpu_ns = None;
        let mut out = Vec::new();
        write_json_rows(&mut out, &snap).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["tid"], 100);
        assert_eq!(v["state"], "RUN");
        assert_eq!(v["since_offcpu_ns"], serde_json::Value::Null);
        assert_eq!(v["syscall"], serde_json::Value::Null);
    }
}
