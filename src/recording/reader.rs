//! Streaming recordings back: one file (`Reader`), or several merged in time
//! order (`Merged`), holding one decoded frame per file at a time.

use std::collections::VecDeque;
use std::io::{Cursor, Read, Seek};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::codec::Decoder;
use super::frame::{FrameReader, KIND_DELTA, KIND_KEY, KIND_SESSION};
use super::limits::{is_corrupt, Budget};
use super::session;
use crate::model::{Session, Snapshot};

/// Where a recording is read from: a file, or bytes in memory (tests, fuzzing).
pub trait Source: Read + Seek + Send {}
impl<T: Read + Seek + Send> Source for T {}

pub struct Reader {
    name: String,
    frames: FrameReader<Box<dyn Source>>,
    dec: Decoder,
    session: Session,
    pending: VecDeque<Snapshot>,
    /// After damage, delta frames refer to tables we lost: wait for a key frame.
    need_key: bool,
    skipped_frames: u64,
    /// Stretches of damage skipped by the frame layer (bad checksums, torn frames).
    damaged: u64,
    /// Intact frames whose contents did not decode.
    undecodable: u64,
    dropped: DroppedCount,
    warnings: Vec<String>,
    /// What decoding this file may cost, growing with the bytes read.
    budget: Budget,
    /// A broken limit: reading stopped there, and the whole read fails.
    failed: Option<anyhow::Error>,
    pub version: u16,
}

/// Sums the sampler's cumulative "dropped so far" counter across restarts.
#[derive(Default)]
struct DroppedCount {
    last: u64,
    total: u64,
}

impl DroppedCount {
    fn see(&mut self, cumulative: u64) {
        self.total += cumulative.checked_sub(self.last).unwrap_or(cumulative);
        self.last = cumulative;
    }
}

impl Reader {
    pub fn open(path: &Path) -> Result<Reader> {
        let file = crate::atomic_file::open_regular(path)?;
        Reader::new(path.display().to_string(), Box::new(file))
    }

    /// A recording held in memory, named `name` in messages: what the fuzz
    /// tests feed (`recording::fuzz`), without a file per case.
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Result<Reader> {
        Reader::new(name.to_string(), Box::new(Cursor::new(bytes)))
    }

    fn new(name: String, source: Box<dyn Source>) -> Result<Reader> {
        let (mut frames, version) = FrameReader::open(source).with_context(|| name.clone())?;
        let (session, app_frames) = loop {
            match frames.next_frame().with_context(|| name.clone())? {
                Some(f) if f.kind == KIND_SESSION => match session::decode(&f.payload) {
                    Ok(s) => break (s, session::has_app_frames(&f.payload)),
                    Err(e) if is_corrupt(&e) => return Err(corrupt_at(&name, f.offset, &e)),
                    Err(e) => return Err(e.context(format!("{name}: bad session header"))),
                },
                Some(_) => continue, // damaged start: the session frame was lost, try the next one
                None => {
                    anyhow::bail!("{name}: no intact session header (recording interrupted at its start?)")
                }
            }
        };
        let mut r = Reader {
            name,
            frames,
            dec: Decoder::default(),
            session,
            pending: VecDeque::new(),
            need_key: true,
            skipped_frames: 0,
            damaged: 0,
            undecodable: 0,
            dropped: DroppedCount::default(),
            warnings: Vec::new(),
            budget: Budget::new(),
            failed: None,
            version,
        };
        r.dec.without_app_frames = !app_frames;
        r.take_frame_warnings();
        Ok(r)
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Problems met so far, each prefixed with the file name.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    fn take_frame_warnings(&mut self) -> bool {
        let w = std::mem::take(&mut self.frames.warnings);
        let damaged = !w.is_empty();
        self.damaged += w.len() as u64;
        self.warnings
            .extend(w.into_iter().map(|w| format!("{}: {w}", self.name)));
        damaged
    }

    #[cfg(test)]
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// (stretches of damage skipped, intact frames that did not decode) so far.
    pub fn damage(&self) -> (u64, u64) {
        (self.damaged, self.undecodable)
    }

    /// Why reading stopped early, if it did: the file broke a limit.
    pub fn take_error(&mut self) -> Option<anyhow::Error> {
        self.failed.take()
    }

    /// Reads frames until one yields snapshots; false at the end of the file
    /// or at a broken limit (`failed`).
    fn fill(&mut self) -> bool {
        while self.pending.is_empty() {
            if self.failed.is_some() {
                return false;
            }
            let f = match self.frames.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => {
                    self.take_frame_warnings();
                    self.finish();
                    return false;
                }
                Err(e) => {
                    self.failed = Some(e.context(self.name.clone()));
                    return false;
                }
            };
            if self.take_frame_warnings() {
                self.need_key = true;
            }
            match f.kind {
                // An appended session's frames follow it (from a key frame).
                KIND_SESSION => match session::decode(&f.payload)
                    .inspect(|_| self.dec.without_app_frames = !session::has_app_frames(&f.payload))
                {
                    Ok(s) if s.host != self.session.host => self.warnings.push(format!(
                        "{}: appended session from host '{}' differs from '{}'",
                        self.name, s.host, self.session.host
                    )),
                    Ok(_) => {}
                    Err(e) if is_corrupt(&e) => return self.fail(f.offset, e),
                    Err(e) => self.warnings.push(format!(
                        "{}: bad session frame at byte {}: {e}",
                        self.name, f.offset
                    )),
                },
                KIND_KEY | KIND_DELTA => {
                    if f.kind == KIND_KEY {
                        self.dec.reset();
                        self.need_key = false;
                    } else if self.need_key {
                        self.skipped_frames += 1;
                        continue;
                    }
                    let mut out = Vec::new();
                    self.budget.read_to(self.frames.position());
                    match self.dec.decode(&f.payload, &mut out, &mut self.budget) {
                        Ok(()) => self.pending.extend(out),
                        Err(e) if is_corrupt(&e) => return self.fail(f.offset, e),
                        Err(e) => {
                            self.undecodable += 1;
                            self.warnings.push(format!(
                                "{}: undecodable frame at byte {}: {e:#}",
                                self.name, f.offset
                            ));
                            self.need_key = true;
                        }
                    }
                }
                _ => {} // a frame kind from a newer xtop that older readers may ignore
            }
        }
        true
    }

    /// The frame at `offset` broke a limit: reading stops (false, for `fill`).
    fn fail(&mut self, offset: u64, e: anyhow::Error) -> bool {
        self.failed = Some(corrupt_at(&self.name, offset, &e));
        false
    }

    fn finish(&mut self) {
        if self.skipped_frames > 0 {
            self.warnings.push(format!(
                "{}: {} frames after damage skipped (they depend on lost data)",
                self.name, self.skipped_frames
            ));
            self.skipped_frames = 0;
        }
        if self.dropped.total > 0 {
            self.warnings.push(format!(
                "{}: the sampler dropped {} snapshots while recording (xtop fell behind)",
                self.name, self.dropped.total
            ));
            self.dropped.total = 0;
        }
    }

    fn peek_time(&mut self) -> Option<u64> {
        if self.fill() {
            self.pending.front().map(|s| s.time_ns)
        } else {
            None
        }
    }
}

impl Iterator for Reader {
    type Item = Snapshot;

    fn next(&mut self) -> Option<Snapshot> {
        if !self.fill() {
            return None;
        }
        let s = self.pending.pop_front()?;
        self.dropped.see(s.dropped);
        Some(s)
    }
}

/// "FILE: corrupt at byte N: what", as the frame layer says it for its own limits.
fn corrupt_at(name: &str, offset: u64, e: &anyhow::Error) -> anyhow::Error {
    super::limits::at(offset, e).context(name.to_string())
}

/// Several recordings as one stream, in time order.
pub struct Merged {
    readers: Vec<Reader>,
    extra_warnings: Vec<String>,
}

impl Merged {
    pub fn open(paths: &[PathBuf]) -> Result<Merged> {
        if paths.is_empty() {
            anyhow::bail!("no recording files given");
        }
        let readers = paths
            .iter()
            .map(|p| Reader::open(p))
            .collect::<Result<Vec<_>>>()?;
        let mut extra_warnings = Vec::new();
        let host = &readers[0].session.host;
        if let Some(r) = readers.iter().find(|r| &r.session.host != host) {
            extra_warnings.push(format!(
                "{}: recorded on '{}', not '{host}' like {}",
                r.name, r.session.host, readers[0].name
            ));
        }
        Ok(Merged {
            readers,
            extra_warnings,
        })
    }

    /// The first file's session stands for all of them.
    pub fn session(&self) -> &Session {
        &self.readers[0].session
    }

    /// The first broken limit met: reading stopped there (see `Reader::take_error`).
    pub fn take_error(&mut self) -> Option<anyhow::Error> {
        self.readers.iter_mut().find_map(Reader::take_error)
    }

    pub fn warnings(&self) -> Vec<String> {
        let mut w = self.extra_warnings.clone();
        self.readers.iter().for_each(|r| w.extend_from_slice(&r.warnings));
        w
    }
}

impl Iterator for Merged {
    type Item = Snapshot;

    fn next(&mut self) -> Option<Snapshot> {
        let mut best: Option<(usize, u64)> = None;
        for (k, r) in self.readers.iter_mut().enumerate() {
            if let Some(t) = r.peek_time() {
                if best.is_none_or(|(_, bt)| t < bt) {
                    best = Some((k, t));
                }
            }
        }
        // One file broke a limit: the merged stream ends there, it does not go on without it.
        if self.readers.iter().any(|r| r.failed.is_some()) {
            return None;
        }
        self.readers[best?.0].next()
    }
}
