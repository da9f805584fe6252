//! Local-time names and `--from/--to` parsing. libc's localtime_r/mktime use
//! the system time zone database, as `value::format_local_time` does.

use anyhow::Result;

const NS: u64 = 1_000_000_000;

fn local(ns: u64) -> libc::tm {
    let secs = (ns / NS) as libc::time_t;
    // SAFETY: localtime_r only writes into the zeroed tm we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&secs, &mut tm) };
    tm
}

/// `YYYYmmdd-HHMMSS`, for rotated recording names.
pub fn compact(ns: u64) -> String {
    let t = local(ns);
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        t.tm_year + 1900,
        t.tm_mon + 1,
        t.tm_mday,
        t.tm_hour,
        t.tm_min,
        t.tm_sec
    )
}

/// `YYYY-MM-DD.HH`, xcapture's hourly file suffix.
pub fn hour(ns: u64) -> String {
    let t = local(ns);
    format!(
        "{:04}-{:02}-{:02}.{:02}",
        t.tm_year + 1900,
        t.tm_mon + 1,
        t.tm_mday,
        t.tm_hour
    )
}

/// A `--from`/`--to` bound: an absolute local time (`2026-11-29T12:00:00`,
/// `2026-11-29 12:00`, optional fraction) or an offset such as `10m` from
/// `start_ns`, the beginning of the recording.
pub fn parse_bound(text: &str, start_ns: u64) -> Result<u64> {
    let t = text.trim();
    if let Ok(d) = humantime::parse_duration(t) {
        return Ok(start_ns + d.as_nanos() as u64);
    }
    parse_local(t).ok_or_else(|| {
        anyhow::anyhow!("bad time '{t}': expected YYYY-MM-DDTHH:MM[:SS] (local time) or an offset like 10m")
    })
}

fn parse_local(t: &str) -> Option<u64> {
    let (date, time) = t.split_once(['T', ' '])?;
    let d: Vec<&str> = date.split('-').collect();
    let (time, frac) = time.split_once('.').unwrap_or((time, ""));
    let c: Vec<&str> = time.split(':').collect();
    if d.len() != 3
        || !(2..=3).contains(&c.len())
        || frac.len() > 9
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let num = |s: &str| s.parse::<i32>().ok();
    // SAFETY: a zeroed tm is a valid input for mktime once its fields are set.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    tm.tm_year = num(d[0])? - 1900;
    tm.tm_mon = num(d[1])? - 1;
    tm.tm_mday = num(d[2])?;
    tm.tm_hour = num(c[0])?;
    tm.tm_min = num(c[1])?;
    tm.tm_sec = c.get(2).map_or(Some(0), |s| num(s))?;
    tm.tm_isdst = -1; // let mktime decide whether summer time applies
    if !(0..12).contains(&tm.tm_mon) || !(1..=31).contains(&tm.tm_mday) || tm.tm_hour > 23 || tm.tm_min > 59 {
        return None;
    }
    let secs = unsafe { libc::mktime(&mut tm) };
    if secs < 0 {
        return None;
    }
    let frac_ns = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<9}").parse::<u64>().ok()?
    };
    Some(secs as u64 * NS + frac_ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixture::T0_NS;
    use crate::value::format_local_time;

    #[test]
    fn absolute_times_are_local_and_offsets_relative() {
        let shown = format_local_time(T0_NS); // whatever the zone, it must parse back
        assert_eq!(parse_bound(&shown, 0).unwrap(), T0_NS);
        assert_eq!(parse_bound(&shown[..16], 0).unwrap(), T0_NS);
        assert_eq!(parse_bound("10m", T0_NS).unwrap(), T0_NS + 600 * NS);
        assert_eq!(parse_bound("1h 30s", 0).unwrap(), 3630 * NS);
        let err = parse_bound("yesterday", 0).unwrap_err().to_string();
        assert!(err.contains("'yesterday'") && err.contains("offset"), "{err}");
        assert!(parse_bound("2026-13-01T00:00", 0).is_err());
        assert_eq!(compact(T0_NS).len(), 15);
        assert_eq!(hour(T0_NS).len(), 13);
    }
}
