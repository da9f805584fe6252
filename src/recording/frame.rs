//! File and frame layout: the crash-safety layer, knowing nothing of snapshots.
//!
//! ```text
//! file  := MAGIC[8] VERSION:u16le frame*
//! frame := SYNC[4] LEN:u32le CRC:u32le body[LEN]      CRC = crc32(LEN bytes ++ body)
//! body  := KIND:u8 CODEC:u8 payload                   CODEC 1: RAWLEN:varint zstd-frame
//! ```
//! Each frame goes out in one `write`, so a crash leaves whole frames plus at
//! most one torn one. The reader checks every CRC; after a bad frame it scans
//! for the next SYNC that starts an intact frame, so one flipped byte costs
//! one frame, not the rest of the file.

use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};

use anyhow::{bail, Result};

use super::limits::{corrupt, is_corrupt, raw_cap, MAX_RAW, WRITER_RATIO};
use super::varint::{In, Out};

/// PNG-style: a non-ASCII byte and CR/LF catch text-mode mangling early.
pub const MAGIC: [u8; 8] = *b"\x89XTOP\r\n\x1a";
/// 2: samples carry user stacks (codec `M_USTACK`); 3: the file their syscall
/// works on (`M_TARGET`); 4: what its socket connects (`T_SOCKET`).
pub const VERSION: u16 = 6;
/// Oldest format this build still reads.
pub const MIN_VERSION: u16 = 1;
pub const HEADER_LEN: usize = MAGIC.len() + 2;
const SYNC: [u8; 4] = *b"XTfr";
const HEAD_LEN: usize = 12;
/// Larger frames are corruption, not data: a frame holds a few snapshots.
const MAX_FRAME: usize = 64 << 20;

pub const KIND_SESSION: u8 = 1;
/// Snapshots encoded from empty tables: a reader can start (or restart) here.
pub const KIND_KEY: u8 = 2;
/// Snapshots encoded against the tables built since the last key frame.
pub const KIND_DELTA: u8 = 3;

const CODEC_RAW: u8 = 0;
const CODEC_ZSTD: u8 = 1;

pub fn file_header() -> [u8; HEADER_LEN] {
    let mut h = [0; HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8..].copy_from_slice(&VERSION.to_le_bytes());
    h
}

/// Checks magic and version; the one-line reasons are what users see.
pub fn check_header(h: &[u8]) -> Result<u16> {
    if h.is_empty() {
        bail!("empty file, not an xtop recording");
    }
    if h.len() < HEADER_LEN {
        if MAGIC.starts_with(&h[..h.len().min(8)]) {
            bail!("truncated recording header ({} bytes)", h.len());
        }
        bail!("not an xtop recording (too short)");
    }
    if h[..8] != MAGIC {
        bail!("not an xtop recording (bad magic)");
    }
    let v = u16::from_le_bytes([h[8], h[9]]);
    if v > VERSION {
        bail!("recording format version {v} is newer than this xtop reads (up to {VERSION}); upgrade xtop");
    }
    if v < MIN_VERSION {
        bail!("recording format version {v} is no longer supported (oldest readable: {MIN_VERSION})");
    }
    Ok(v)
}

/// Builds frames, compressing payloads with zstd when that makes them smaller.
pub struct FrameEncoder {
    zstd: zstd::bulk::Compressor<'static>,
}

impl FrameEncoder {
    pub fn new() -> Result<Self> {
        // Level 3: zstd's default, ~0.1 ms for a snapshot; higher levels gain little on deltas.
        Ok(FrameEncoder {
            zstd: zstd::bulk::Compressor::new(3)?,
        })
    }

    /// One frame holding `payload`, which decodes to at most `cost` bytes of
    /// memory; refuses what no reader would accept.
    pub fn frame(&mut self, kind: u8, payload: &[u8], cost: u64) -> Result<Vec<u8>> {
        if payload.len() > MAX_RAW {
            bail!(
                "{} bytes of snapshot data are more than one recording frame may hold ({MAX_RAW})",
                payload.len()
            );
        }
        let mut body = Out::default();
        body.u8(kind);
        let packed = if payload.len() > 64 {
            Some(self.zstd.compress(payload)?)
        } else {
            None
        };
        match packed {
            // Compressed only where a reader's bomb checks let it expand again:
            // to its raw size, and to the memory it decodes to.
            Some(z)
                if z.len() + 4 < payload.len()
                    && payload.len() <= raw_cap(z.len())
                    && cost <= WRITER_RATIO * (HEAD_LEN + z.len()) as u64 =>
            {
                body.u8(CODEC_ZSTD);
                body.uv(payload.len() as u64);
                body.buf.extend_from_slice(&z);
            }
            _ => {
                body.u8(CODEC_RAW);
                body.buf.extend_from_slice(payload);
            }
        }
        if body.buf.len() > MAX_FRAME {
            bail!(
                "{} bytes of snapshot data do not compress into one recording frame",
                payload.len()
            );
        }
        let len = (body.buf.len() as u32).to_le_bytes();
        let mut crc = crc32fast::Hasher::new();
        crc.update(&len);
        crc.update(&body.buf);
        let mut out = Vec::with_capacity(HEAD_LEN + body.buf.len());
        out.extend_from_slice(&SYNC);
        out.extend_from_slice(&len);
        out.extend_from_slice(&crc.finalize().to_le_bytes());
        out.extend_from_slice(&body.buf);
        Ok(out)
    }
}

pub struct Frame {
    pub offset: u64,
    pub kind: u8,
    pub payload: Vec<u8>,
}

/// Streams intact frames; damage becomes a warning, never a hang. An intact
/// frame that breaks a limit (`limits`) is an error: it was made, not damaged.
pub struct FrameReader<R: Read + Seek> {
    r: BufReader<R>,
    pos: u64,
    end: u64,
    zstd: zstd::bulk::Decompressor<'static>,
    /// Bytes read as candidate frames (to check their CRC), and the most a
    /// search for intact frames after damage may read: a file full of false
    /// frame starts would otherwise cost time quadratic in its size.
    checked: u64,
    check_limit: u64,
    pub warnings: Vec<String>,
}

impl<R: Read + Seek> FrameReader<R> {
    /// Reads and checks the file header; returns the reader and the format version.
    pub fn open(mut inner: R) -> Result<(Self, u16)> {
        let end = inner.seek(SeekFrom::End(0))?;
        inner.seek(SeekFrom::Start(0))?;
        let mut h = Vec::with_capacity(HEADER_LEN);
        (&mut inner).take(HEADER_LEN as u64).read_to_end(&mut h)?;
        let version = check_header(&h)?;
        let r = BufReader::with_capacity(256 << 10, inner);
        let zstd = zstd::bulk::Decompressor::new()?;
        Ok((
            FrameReader {
                r,
                pos: HEADER_LEN as u64,
                end,
                zstd,
                checked: 0,
                check_limit: end.saturating_mul(4).saturating_add(256 << 20),
                warnings: Vec::new(),
            },
            version,
        ))
    }

    /// Offset just past the last frame returned (where an appender may continue).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The next intact frame, None at the end; an error only for a frame that
    /// is intact but breaks a limit ("corrupt at byte N: ...").
    pub fn next_frame(&mut self) -> Result<Option<Frame>> {
        if self.pos >= self.end {
            return Ok(None);
        }
        let start = self.pos;
        if let Some(f) = self.checked_frame_here()? {
            return Ok(Some(f));
        }
        // Damaged: look for the next intact frame, one byte further each time.
        let mut at = start + 1;
        while let Some(cand) = self.find_sync(at) {
            if self.checked > self.check_limit {
                self.warnings.push(format!(
                    "damaged data from byte {start} on skipped: too many false frame starts to search ({} bytes)",
                    self.end - start
                ));
                self.pos = self.end;
                return Ok(None);
            }
            if self.seek(cand).is_ok() {
                if let Some(f) = self.checked_frame_here()? {
                    self.warnings.push(format!(
                        "corrupt data at byte {start}: skipped {} bytes to the next intact frame",
                        cand - start
                    ));
                    return Ok(Some(f));
                }
            }
            at = cand + 1;
        }
        self.warnings.push(format!(
            "incomplete or damaged last {} bytes at byte {start} skipped (recording interrupted?)",
            self.end - start
        ));
        self.pos = self.end;
        Ok(None)
    }

    /// Moves to `pos`, keeping what is buffered when `pos` is inside it: the
    /// search after damage tries every "XTfr" in turn, and must not reread a
    /// buffer for each.
    fn seek(&mut self, pos: u64) -> io::Result<()> {
        let cur = self.r.stream_position()?;
        self.r.seek_relative(pos as i64 - cur as i64)?;
        self.pos = pos;
        Ok(())
    }

    /// The frame here if intact; None if damaged; an error if it breaks a limit.
    fn checked_frame_here(&mut self) -> Result<Option<Frame>> {
        let offset = self.pos;
        match self.frame_here() {
            Ok(f) => Ok(Some(f)),
            Err(e) if is_corrupt(&e) => Err(super::limits::at(offset, &e)),
            Err(_) => Ok(None),
        }
    }

    /// Parses the frame at `self.pos` (the reader is positioned there).
    fn frame_here(&mut self) -> Result<Frame> {
        let offset = self.pos;
        let mut head = [0u8; HEAD_LEN];
        self.r.read_exact(&mut head)?;
        if head[..4] != SYNC {
            bail!("no frame sync");
        }
        let len_bytes = [head[4], head[5], head[6], head[7]];
        let len = u32::from_le_bytes(len_bytes) as usize;
        let crc = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
        if !(2..=MAX_FRAME).contains(&len) || offset + (HEAD_LEN + len) as u64 > self.end {
            bail!("bad frame length");
        }
        self.checked += len as u64;
        let mut body = vec![0; len];
        self.r.read_exact(&mut body)?;
        let mut h = crc32fast::Hasher::new();
        h.update(&len_bytes);
        h.update(&body);
        if h.finalize() != crc {
            bail!("checksum mismatch");
        }
        // Intact from here on: whatever is wrong was written so.
        let payload = match body[1] {
            CODEC_RAW => body[2..].to_vec(),
            CODEC_ZSTD => self.unpack(&body[2..])?,
            c => return Err(corrupt(format!("unknown codec {c}"))),
        };
        self.pos = offset + (HEAD_LEN + len) as u64;
        Ok(Frame {
            offset,
            kind: body[0],
            payload,
        })
    }

    /// Decompresses a payload into at most the size it declares, which must
    /// itself be within `raw_cap`: a zstd bomb stops there.
    fn unpack(&mut self, packed: &[u8]) -> Result<Vec<u8>> {
        let mut i = In::new(packed);
        let raw = i.uv()?;
        let z = &packed[packed.len() - i.remaining()..];
        let cap = raw_cap(z.len());
        if raw > cap as u64 {
            return Err(corrupt(format!(
                "a {}-byte frame declares {raw} bytes once decompressed (at most {cap} allowed)",
                z.len()
            )));
        }
        let p = self.zstd.decompress(z, raw as usize).map_err(|e| {
            corrupt(format!(
                "frame does not decompress to its declared {raw} bytes: {e}"
            ))
        })?;
        if p.len() as u64 != raw {
            return Err(corrupt(format!(
                "frame decompresses to {} bytes, not its declared {raw}",
                p.len()
            )));
        }
        Ok(p)
    }

    /// Offset of the next SYNC at or after `from`, scanning the buffer in place.
    fn find_sync(&mut self, from: u64) -> Option<u64> {
        self.seek(from).ok()?;
        let mut window = [0u8; 4];
        let mut pos = from;
        let mut filled = 0;
        loop {
            let buf = self.r.fill_buf().ok()?;
            if buf.is_empty() {
                return None;
            }
            let n = buf.len();
            for (k, &b) in buf.iter().enumerate() {
                window = [window[1], window[2], window[3], b];
                filled += 1;
                if filled >= 4 && window == SYNC {
                    self.r.consume(k + 1);
                    self.pos = pos + k as u64 + 1;
                    return Some(self.pos - 4);
                }
            }
            self.r.consume(n);
            pos += n as u64;
        }
    }
}
