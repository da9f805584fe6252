//! Filters on dimension values: one type for what a user types (`-w`, the
//! screen's `\`) and what drill-down makes of a row, so the screen's Enter,
//! its stack view and a report select samples by the same rule.
//!
//! A row's own values (drill-down, `s`) are kept as values and compared by
//! equality: the filter takes exactly the row's samples, no more. Typed text is
//! compared with each value by the value's kind: numbers as numbers (`tid=42`,
//! `sysc_arg1=0x10` or `=16`), `-` and `?` as "not applicable" and "unknown",
//! xtop's own names (states, syscalls, wait events) without regard to case,
//! since case never tells two of them apart and `state=disk` should work, and
//! text from the system (comm, exe, cmdline, files) exactly, since `Foo` and
//! `foo` are different programs. `~` is a case-insensitive substring of the
//! value as shown.

use crate::dimensions::{self, Dimension};
use crate::model::{Snapshot, ThreadSample};
use crate::value::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterOp {
    Eq,
    Ne,
    Contains,
}

/// What a filter compares a sample's value with.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    /// A value taken from a row: only an equal value matches.
    Value(Value),
    /// Typed text, with its lower case (for `~`) and its number (decimal or
    /// `0x` hex) worked out once rather than per sample.
    Text {
        text: String,
        lower: String,
        num: Option<i128>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Filter {
    pub dim: &'static Dimension,
    pub op: FilterOp,
    pub operand: Operand,
}

fn number(text: &str) -> Option<i128> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => i128::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// Whether typed `text` (with its number `num`) names value `v`.
fn names(v: &Value, text: &str, num: Option<i128>) -> bool {
    match v {
        Value::Missing => text == "-",
        Value::Unknown => text == "?",
        Value::Int(i) => num == Some(*i as i128),
        Value::Hex(h) => num == Some(*h as i128),
        Value::Name(n) => n.eq_ignore_ascii_case(text),
        Value::Text(t) => &**t == text,
        Value::Time(_) => v.to_string() == text,
    }
}

impl Filter {
    /// `dim=value`, `dim!=value` or `dim~text`, as typed.
    pub fn parse(text: &str) -> Result<Filter, String> {
        let (name, op, value) = if let Some((n, v)) = text.split_once("!=") {
            (n, FilterOp::Ne, v)
        } else if let Some((n, v)) = text.split_once('~') {
            (n, FilterOp::Contains, v)
        } else if let Some((n, v)) = text.split_once('=') {
            (n, FilterOp::Eq, v)
        } else {
            return Err(format!(
                "bad filter '{text}': expected DIM=VALUE, DIM!=VALUE or DIM~TEXT"
            ));
        };
        let dim = dimensions::find(name)
            .ok_or_else(|| format!("bad filter '{text}': unknown dimension '{}'", name.trim()))?;
        let text = value.trim();
        Ok(Filter {
            dim,
            op,
            operand: Operand::Text {
                text: text.to_string(),
                lower: text.to_lowercase(),
                num: number(text),
            },
        })
    }

    /// A filter that matches exactly this value (drill-down, a row's samples).
    pub fn exact(dim: &'static Dimension, value: &Value) -> Filter {
        Filter {
            dim,
            op: FilterOp::Eq,
            operand: Operand::Value(value.clone()),
        }
    }

    /// Whether every sample this filter passes has `dim` equal to one value:
    /// drill-down need not add another filter for that dimension.
    pub fn pins(&self, dim: &Dimension) -> bool {
        self.op == FilterOp::Eq && std::ptr::eq(self.dim, dim)
    }

    /// The one number an `=` filter pins its dimension to (the thread view's tid).
    pub fn pinned_number(&self) -> Option<i128> {
        if self.op != FilterOp::Eq {
            return None;
        }
        match &self.operand {
            Operand::Value(Value::Int(i)) => Some(*i as i128),
            Operand::Value(Value::Hex(h)) => Some(*h as i128),
            Operand::Value(_) => None,
            Operand::Text { num, .. } => *num,
        }
    }

    pub fn matches(&self, snap: &Snapshot, s: &ThreadSample) -> bool {
        let v = self.dim.value(snap, s);
        let equal = || match &self.operand {
            Operand::Value(want) => v == *want,
            Operand::Text { text, num, .. } => names(&v, text, *num),
        };
        match self.op {
            FilterOp::Eq => equal(),
            FilterOp::Ne => !equal(),
            FilterOp::Contains => {
                let have = v.to_string().to_lowercase();
                match &self.operand {
                    Operand::Text { lower, .. } => have.contains(lower.as_str()),
                    Operand::Value(want) => have.contains(&want.to_string().to_lowercase()),
                }
            }
        }
    }
}

impl std::fmt::Display for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let op = match self.op {
            FilterOp::Eq => "=",
            FilterOp::Ne => "!=",
            FilterOp::Contains => "~",
        };
        match &self.operand {
            Operand::Value(v) => write!(f, "{}{op}{v}", self.dim.name),
            Operand::Text { text, .. } => write!(f, "{}{op}{text}", self.dim.name),
        }
    }
}

pub fn matches_all(filters: &[Filter], snap: &Snapshot, s: &ThreadSample) -> bool {
    filters.iter().all(|f| f.matches(snap, s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixture::{sample, snapshot};
    use crate::model::State;

    fn pass(filter: &Filter, comms: &[&str]) -> Vec<String> {
        let snap = snapshot(
            0,
            comms
                .iter()
                .enumerate()
                .map(|(i, c)| sample(i as u32 + 1, i as u32 + 1, c, State::Run, None))
                .collect(),
        );
        snap.samples
            .iter()
            .filter(|s| filter.matches(&snap, s))
            .map(|s| s.ident.comm.to_string())
            .collect()
    }

    #[test]
    fn a_rows_value_selects_that_value_only() {
        let comm = dimensions::find("comm").unwrap();
        let f = Filter::exact(comm, &Value::Text("Foo".into()));
        assert_eq!(pass(&f, &["Foo", "foo", "FOO", "Foo2"]), ["Foo"]);
        assert_eq!(f.to_string(), "comm=Foo");
    }

    #[test]
    fn typed_text_compares_by_the_values_kind() {
        let f = |t: &str| Filter::parse(t).unwrap();
        // System text is exact; `~` stays a case-insensitive substring.
        assert_eq!(pass(&f("comm=Foo"), &["Foo", "foo"]), ["Foo"]);
        assert_eq!(pass(&f("comm!=Foo"), &["Foo", "foo"]), ["foo"]);
        assert_eq!(pass(&f("comm~FO"), &["Foo", "foo", "bar"]), ["Foo", "foo"]);
        // xtop's names ignore case; numbers compare as numbers in either base.
        assert!(names(&Value::Name("DISK"), "disk", None));
        assert!(names(&Value::Int(42), "0x2a", number("0x2a")));
        assert!(names(&Value::Hex(16), "16", number("16")));
        assert!(!names(&Value::Int(42), "42x", number("42x")));
        assert!(names(&Value::Missing, "-", None) && names(&Value::Unknown, "?", None));
        assert!(!names(&Value::Text("-".into()), "?", None));
        assert_eq!(f("tid=0x10").pinned_number(), Some(16));
        assert_eq!(f("tid~1").pinned_number(), None);
    }

    #[test]
    fn bad_filters_say_why() {
        assert!(Filter::parse("state").unwrap_err().contains("expected"));
        assert!(Filter::parse("nope=1").unwrap_err().contains("'nope'"));
        assert_eq!(Filter::parse("comm~pg").unwrap().to_string(), "comm~pg");
    }
}
