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

use std::io::{self, BufReader, Read, Seek, SeekFrom};

use anyhow::{bail, Result};

use super::varint::{In, Out};

/// PNG-style: a non-ASCII byte and CR/LF catch text-mode mangling early.
pub const MAGIC: [u8; 8] = *b"\x89XTOP\r\n\x1a";
/// 2: samples carry user stacks (codec `M_USTACK`).
pub const VERSION: u16 = 2;
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

    pub fn frame(&mut self, kind: u8, payload: &[u8]) -> Result<Vec<u8>> {
        let mut body = Out::default();
        body.u8(kind);
        let packed = if payload.len() > 64 {
            Some(self.zstd.compress(payload)?)
        } else {
            None
        };
        match packed {
            Some(z) if z.len() + 4 < payload.len() => {
                body.u8(CODEC_ZSTD);
                body.uv(payload.len() as u64);
                body.buf.extend_from_slice(&z);
            }
            _ => {
                body.u8(CODEC_RAW);
                body.buf.extend_from_slice(payload);
            }
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

/// Streams intact frames; damage becomes a warning, never an error or a hang.
pub struct FrameReader<R: Read + Seek> {
    r: BufReader<R>,
    pos: u64,
    end: u64,
    zstd: zstd::bulk::Decompressor<'static>,
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
                warnings: Vec::new(),
            },
            version,
        ))
    }

    /// Offset just past the last frame returned (where an appender may continue).
    pub fn position(&self) -> u64 {
        self.pos
    }

    pub fn next_frame(&mut self) -> Option<Frame> {
        if self.pos >= self.end {
            return None;
        }
        let start = self.pos;
        if let Ok(f) = self.frame_here() {
            return Some(f);
        }
        // Damaged: look for the next intact frame, one byte further each time.
        let mut at = start + 1;
        while let Some(cand) = self.find_sync(at) {
            if self.seek(cand).is_ok() {
                if let Ok(f) = self.frame_here() {
                    self.warnings.push(format!(
                        "corrupt data at byte {start}: skipped {} bytes to the next intact frame",
                        cand - start
                    ));
                    return Some(f);
                }
            }
            at = cand + 1;
        }
        self.warnings.push(format!(
            "incomplete or damaged last {} bytes at byte {start} skipped (recording interrupted?)",
            self.end - start
        ));
        self.pos = self.end;
        None
    }

    fn seek(&mut self, pos: u64) -> io::Result<()> {
        self.r.seek(SeekFrom::Start(pos))?;
        self.pos = pos;
        Ok(())
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
        let mut body = vec![0; len];
        self.r.read_exact(&mut body)?;
        let mut h = crc32fast::Hasher::new();
        h.update(&len_bytes);
        h.update(&body);
        if h.finalize() != crc {
            bail!("checksum mismatch");
        }
        let payload = match body[1] {
            CODEC_RAW => body[2..].to_vec(),
            CODEC_ZSTD => {
                let mut i = In::new(&body[2..]);
                let raw = i.uv()? as usize;
                if raw > MAX_FRAME * 8 {
                    bail!("frame too large");
                }
                let z = &body[body.len() - i.remaining()..];
                let p = self.zstd.decompress(z, raw)?;
                if p.len() != raw {
                    bail!("frame size mismatch");
                }
                p
            }
            c => bail!("unknown codec {c}"),
        };
        self.pos = offset + (HEAD_LEN + len) as u64;
        Ok(Frame {
            offset,
            kind: body[0],
            payload,
        })
    }

    /// Offset of the next SYNC at or after `from`.
    fn find_sync(&mut self, from: u64) -> Option<u64> {
        self.seek(from).ok()?;
        let mut window = [0u8; 4];
        let mut pos = from;
        let mut filled = 0;
        let mut buf = [0u8; 64 << 10];
        loop {
            let n = self.r.read(&mut buf).ok()?;
            if n == 0 {
                return None;
            }
            for &b in &buf[..n] {
                window = [window[1], window[2], window[3], b];
                filled += 1;
                pos += 1;
                if filled >= 4 && window == SYNC {
                    return Some(pos - 4);
                }
            }
        }
    }
}
