//! LEB128 varints and bounds-checked byte cursors. Hand-written rather than a
//! serde format: most recorded numbers are small deltas, and one byte for them
//! is what keeps a steady sample under a dozen bytes.

use anyhow::{bail, Result};

use super::limits::corrupt;

#[derive(Default)]
pub struct Out {
    pub buf: Vec<u8>,
}

impl Out {
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub fn uv(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    /// Signed value, zigzag-coded so small negatives stay small.
    pub fn iv(&mut self, v: i64) {
        self.uv(((v << 1) ^ (v >> 63)) as u64);
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.uv(b.len() as u64);
        self.buf.extend_from_slice(b);
    }
}

/// Reads what `Out` wrote; every read fails cleanly at the end of the input.
pub struct In<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> In<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        In { buf, pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn u8(&mut self) -> Result<u8> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => bail!("record ends early"),
        }
    }

    pub fn uv(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        bail!("varint too long")
    }

    pub fn u32(&mut self) -> Result<u32> {
        let v = self.uv()?;
        u32::try_from(v).map_err(|_| anyhow::anyhow!("value {v} out of range"))
    }

    pub fn iv(&mut self) -> Result<i64> {
        let v = self.uv()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// A count of `what`, each taking at least `min_bytes` bytes: checked
    /// against what is left, so a corrupt count cannot make a reader allocate
    /// gigabytes. A count that cannot fit is `Corrupt`, not ordinary damage.
    pub fn count_of(&mut self, min_bytes: usize, what: &str) -> Result<usize> {
        let n = self.uv()?;
        let room = (self.remaining() / min_bytes.max(1)) as u64;
        if n > room {
            return Err(corrupt(format!(
                "declares {n} {what} where the {} bytes left hold at most {room}",
                self.remaining()
            )));
        }
        Ok(n as usize)
    }

    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.count_of(1, "bytes")?;
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    /// A string of at most `max` bytes.
    pub fn str_max(&mut self, max: usize) -> Result<&'a str> {
        let b = self.bytes()?;
        if b.len() > max {
            return Err(corrupt(format!(
                "a {}-byte string where at most {max} are allowed",
                b.len()
            )));
        }
        Ok(std::str::from_utf8(b)?)
    }

    pub fn str(&mut self) -> Result<&'a str> {
        Ok(std::str::from_utf8(self.bytes()?)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_extremes_and_rejects_truncation() {
        let mut o = Out::default();
        let us = [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX];
        let is = [0, -1, 1, -64, 64, i64::MIN, i64::MAX];
        us.iter().for_each(|&v| o.uv(v));
        is.iter().for_each(|&v| o.iv(v));
        o.bytes(b"hi");
        assert_eq!(o.buf[..3], [0, 1, 127]);
        let mut i = In::new(&o.buf);
        for v in us {
            assert_eq!(i.uv().unwrap(), v);
        }
        for v in is {
            assert_eq!(i.iv().unwrap(), v);
        }
        assert_eq!(i.str().unwrap(), "hi");
        assert!(i.is_empty() && i.u8().is_err());
        assert!(In::new(&[0x80, 0x80]).uv().is_err());
        assert!(In::new(&[0xff; 11]).uv().is_err());
        assert!(In::new(&[5, b'a']).bytes().is_err());
        let e = In::new(&[3, 0, 0, 0, 0, 0]).count_of(2, "x").unwrap_err();
        assert!(super::super::limits::is_corrupt(&e), "{e}");
        assert_eq!(In::new(&[3, 0, 0, 0, 0, 0, 0]).count_of(2, "x").unwrap(), 3);
        assert!(In::new(&[3, b'a', b'b', b'c']).str_max(2).is_err());
    }
}
