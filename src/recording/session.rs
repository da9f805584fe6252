//! The session frame: `model::Session` as key/value text pairs, so a reader
//! skips keys it does not know and a later xtop can add some without a new
//! format version.

use std::time::Duration;

use anyhow::{anyhow, Result};

use super::varint::{In, Out};
use crate::model::{Arch, Session};

/// Present in sessions whose user stacks carry their program's own frame.
const APP_FRAMES: &str = "ustack_app";

/// Whether the session's user stacks carry their program's own frame
/// (`Stack::top`): recordings made before have it 0, which would name the C
/// library's leaf as the program's. A session that does not decode has none.
pub fn has_app_frames(payload: &[u8]) -> bool {
    let mut i = In::new(payload);
    let Ok(n) = i.count_of(2, "session fields") else {
        return false;
    };
    (0..n)
        .map_while(|_| Some((i.str().ok()?, i.str().ok()?)))
        .any(|(k, _)| k == APP_FRAMES)
}

pub fn encode(s: &Session) -> Vec<u8> {
    let pairs = [
        ("host", s.host.clone()),
        ("kernel", s.kernel.clone()),
        ("arch", s.arch.name().to_string()),
        ("ncpus", s.ncpus.to_string()),
        ("interval_ns", s.interval.as_nanos().to_string()),
        ("xtop_version", s.xtop_version.clone()),
        ("options", s.options.clone()),
        // User stacks' `top` is their program's own frame (ustack_app).
        (APP_FRAMES, "1".into()),
    ];
    let mut o = Out::default();
    o.uv(pairs.len() as u64);
    for (k, v) in pairs {
        o.bytes(k.as_bytes());
        o.bytes(v.as_bytes());
    }
    o.buf
}

pub fn decode(payload: &[u8]) -> Result<Session> {
    let mut s = Session {
        host: String::new(),
        kernel: String::new(),
        arch: Arch::X86_64,
        ncpus: 0,
        interval: Duration::ZERO,
        xtop_version: String::new(),
        options: String::new(),
    };
    let mut i = In::new(payload);
    for _ in 0..i.count_of(2, "session fields")? {
        let (k, v) = (i.str()?, i.str()?);
        let num = || v.parse::<u64>().map_err(|_| anyhow!("bad session value {k}={v}"));
        match k {
            "host" => s.host = v.into(),
            "kernel" => s.kernel = v.into(),
            "arch" => s.arch = Arch::from_name(v).ok_or_else(|| anyhow!("unknown architecture '{v}'"))?,
            "ncpus" => s.ncpus = num()? as u32,
            "interval_ns" => s.interval = Duration::from_nanos(num()?),
            "xtop_version" => s.xtop_version = v.into(),
            "options" => s.options = v.into(),
            _ => {} // written by a newer xtop: not needed to read the samples
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_unknown_keys_are_skipped() {
        let s = Session {
            host: "db1".into(),
            kernel: "6.12.0".into(),
            arch: Arch::Aarch64,
            ncpus: 64,
            interval: Duration::from_millis(250),
            xtop_version: "0.1.0".into(),
            options: "--all".into(),
        };
        let mut p = encode(&s);
        assert_eq!(decode(&p).unwrap(), s);
        p[0] += 1; // one more pair, from a future xtop
        let mut o = Out { buf: p };
        o.bytes(b"gpu");
        o.bytes(b"none");
        assert_eq!(decode(&o.buf).unwrap(), s);
        assert!(decode(&[1, 4, b'a', b'r', b'c', b'h', 1, b'?']).is_err());
    }

    #[test]
    fn sessions_say_whether_user_stacks_carry_their_program_frame() {
        let s = crate::recording::synth::session(Duration::from_secs(1));
        assert!(has_app_frames(&encode(&s)));
        // An older xtop's session: the same pairs without that key.
        let mut o = Out::default();
        o.uv(1);
        o.bytes(b"host");
        o.bytes(b"db1");
        assert!(!has_app_frames(&o.buf));
        assert!(!has_app_frames(&[]));
        assert!(!has_app_frames(&[9, 1]));
    }
}
