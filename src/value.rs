//! A dimension's value for one sample: what the registry's extractors return and
//! what grouping, filtering and every output format consume.

use std::fmt;
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Value {
    /// Does not apply to this sample (e.g. syscall args of a thread in user space).
    Missing,
    /// Applies, but xtop could not observe it (e.g. a hook that did not attach).
    Unknown,
    Int(i64),
    /// An integer best read in hex (syscall arguments, hashes).
    Hex(u64),
    /// Wall-clock time, ns since the Unix epoch.
    Time(u64),
    Name(&'static str),
    Text(Arc<str>),
}

impl Value {
    pub fn opt_int<T: Into<i64>>(v: Option<T>) -> Value {
        v.map_or(Value::Unknown, |v| Value::Int(v.into()))
    }

    /// The plain text of the value for machine-readable output: empty when
    /// missing or unknown, so columns never carry a fake number.
    pub fn plain(&self) -> String {
        match self {
            Value::Missing | Value::Unknown => String::new(),
            v => v.to_string(),
        }
    }

    pub fn is_known(&self) -> bool {
        !matches!(self, Value::Missing | Value::Unknown)
    }
}

impl fmt::Display for Value {
    /// Human form: `-` for not applicable, `?` for unknown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Missing => f.pad("-"),
            Value::Unknown => f.pad("?"),
            Value::Int(i) => f.pad(&i.to_string()),
            Value::Hex(h) => f.pad(&format!("{h:#x}")),
            Value::Time(ns) => f.pad(&format_local_time(*ns)),
            Value::Name(s) => f.pad(s),
            Value::Text(s) => f.pad(s),
        }
    }
}

/// The broken-down local time of `ns` since the epoch.
fn local_tm(ns: u64) -> Option<libc::tm> {
    let secs = (ns / 1_000_000_000) as libc::time_t;
    // SAFETY: localtime_r only writes into the zeroed tm we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    (!unsafe { libc::localtime_r(&secs, &mut tm) }.is_null()).then_some(tm)
}

/// `YYYY-MM-DDTHH:MM:SS.ffffff` in local time, as xcapture writes timestamps.
pub fn format_local_time(ns: u64) -> String {
    let micros = (ns % 1_000_000_000) / 1000;
    let Some(tm) = local_tm(ns) else {
        return format!("@{ns}");
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{micros:06}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// The local time zone's offset from UTC at `ns`, in seconds (0 if unknown).
pub fn local_utc_offset(ns: u64) -> i64 {
    local_tm(ns).map_or(0, |tm| tm.tm_gmtoff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_missing_are_empty_in_plain_output() {
        assert_eq!(Value::Unknown.plain(), "");
        assert_eq!(Value::Missing.plain(), "");
        assert_eq!(Value::Unknown.to_string(), "?");
        assert_eq!(Value::Missing.to_string(), "-");
        assert_eq!(Value::Hex(255).plain(), "0xff");
        assert_eq!(format!("{:>5}", Value::Int(42)), "   42");
    }

    #[test]
    fn local_time_has_xcapture_shape() {
        let t = format_local_time(1_700_000_000_123_456_789);
        assert_eq!(t.len(), 26, "{t}");
        assert_eq!(&t[10..11], "T");
        assert!(t.ends_with(".123456"), "{t}");
    }
}
