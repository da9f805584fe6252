//! Structure-aware mutation of recordings, for the fuzz test
//! (tests/recording_fuzz.rs) and the `cargo fuzz` target (fuzz/), which
//! includes this file. Frames are split out and their payloads decompressed,
//! mutated, recompressed and checksummed again, so a mutation reaches the
//! decoder behind the CRC instead of being skipped as damage; a few mutations
//! damage the file itself, for the search after damage.
//!
//! Built from the documented layout (docs/recordings.md), not from xtop's own
//! reader, so a bug there is not mirrored here.

use xtop::recording::synth::Rng;

const MAGIC_LEN: usize = 8;
const HEADER_LEN: usize = MAGIC_LEN + 2;
const SYNC: &[u8; 4] = b"XTfr";
const HEAD_LEN: usize = 12;
const CODEC_RAW: u8 = 0;
const CODEC_ZSTD: u8 = 1;
const KIND_SESSION: u8 = 1;

/// One frame, its payload decompressed.
#[derive(Clone)]
struct Frame {
    kind: u8,
    codec: u8,
    payload: Vec<u8>,
    /// For zstd frames: the raw size to declare, when a mutation lies about it.
    declared: Option<u64>,
}

/// A recording split into its parts; what does not parse stays as `tail`.
struct Parts {
    header: Vec<u8>,
    frames: Vec<Frame>,
    tail: Vec<u8>,
}

fn uv(o: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        o.push(v as u8 | 0x80);
        v >>= 7;
    }
    o.push(v as u8);
}

/// The first varint of `b` and its length.
fn read_uv(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &x) in b.iter().enumerate().take(10) {
        v |= u64::from(x & 0x7f) << (7 * i);
        if x < 0x80 {
            return Some((v, i + 1));
        }
    }
    None
}

fn split(file: &[u8]) -> Parts {
    let header = file[..file.len().min(HEADER_LEN)].to_vec();
    let mut frames = Vec::new();
    let mut at = header.len();
    while let Some(f) = frame_at(file, at) {
        at += HEAD_LEN + f.1;
        frames.push(f.0);
    }
    Parts {
        header,
        frames,
        tail: file[at..].to_vec(),
    }
}

/// The frame at `at` and its body length, if intact and decompressible.
fn frame_at(file: &[u8], at: usize) -> Option<(Frame, usize)> {
    let head = file.get(at..at + HEAD_LEN)?;
    if &head[..4] != SYNC {
        return None;
    }
    let len = u32::from_le_bytes(head[4..8].try_into().ok()?) as usize;
    let body = file.get(at + HEAD_LEN..at + HEAD_LEN + len)?;
    if body.len() < 2 || crc(&head[4..8], body) != u32::from_le_bytes(head[8..12].try_into().ok()?) {
        return None;
    }
    let (kind, codec) = (body[0], body[1]);
    let payload = match codec {
        CODEC_RAW => body[2..].to_vec(),
        CODEC_ZSTD => {
            let (raw, n) = read_uv(&body[2..])?;
            // Seeds are real recordings; nothing here decompresses past 64 MiB.
            zstd::bulk::decompress(&body[2 + n..], raw.min(64 << 20) as usize).ok()?
        }
        _ => return None,
    };
    Some((
        Frame {
            kind,
            codec,
            payload,
            declared: None,
        },
        len,
    ))
}

fn crc(len: &[u8], body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(len);
    h.update(body);
    h.finalize()
}

fn join(p: &Parts) -> Vec<u8> {
    let mut out = p.header.clone();
    for f in &p.frames {
        let mut body = vec![f.kind, f.codec];
        if f.codec == CODEC_ZSTD {
            uv(&mut body, f.declared.unwrap_or(f.payload.len() as u64));
            body.extend_from_slice(&zstd::bulk::compress(&f.payload, 1).unwrap_or_default());
        } else {
            body.extend_from_slice(&f.payload);
        }
        let len = (body.len() as u32).to_le_bytes();
        out.extend_from_slice(SYNC);
        out.extend_from_slice(&len);
        out.extend_from_slice(&crc(&len, &body).to_le_bytes());
        out.extend_from_slice(&body);
    }
    out.extend_from_slice(&p.tail);
    out
}

/// Values at the edges of what decoders check: counts, lengths, indexes,
/// deltas (zigzag), and an over-long encoding.
fn edge_varint(r: &mut Rng) -> Vec<u8> {
    const EDGES: [u64; 16] = [
        0,
        1,
        2,
        0x7f,
        0x80,
        0xff,
        0x3fff,
        0x4000,
        0xffff,
        1 << 22, // MAX_THREADS
        4096,    // MAX_STACK_FRAMES
        i32::MAX as u64,
        u32::MAX as u64,
        1 << 32,
        i64::MAX as u64,
        u64::MAX,
    ];
    let mut o = Vec::new();
    match r.below(8) {
        0 => o.extend_from_slice(&[0xff; 10]),
        1 => o.extend_from_slice(&[0x80, 0x80, 0x80, 0x00]), // zero, over-long
        _ => {
            let v = EDGES[r.below(EDGES.len() as u64) as usize];
            let v = match r.below(4) {
                0 => v.wrapping_sub(1),
                1 => v.wrapping_add(1),
                _ => v,
            };
            uv(&mut o, v);
        }
    }
    o
}

fn pick(r: &mut Rng, n: usize) -> usize {
    r.below(n.max(1) as u64) as usize
}

/// A random range of `len` bytes: (start, end).
fn range(r: &mut Rng, len: usize) -> (usize, usize) {
    let a = pick(r, len + 1);
    let b = a + pick(r, (len - a).min(64) + 1);
    (a, b)
}

/// Mutates one payload in place.
fn mutate_payload(r: &mut Rng, p: &mut Vec<u8>, donors: &[&[u8]]) {
    let n = p.len();
    match r.below(9) {
        0 if n > 0 => p[pick(r, n)] ^= 1 << r.below(8),
        1 if n > 0 => p[pick(r, n)] = [0, 0x7f, 0x80, 0xff][pick(r, 4)],
        2 | 3 => {
            // An edge value over 0-3 bytes: varints shift what follows, as a real bug would.
            let (a, _) = range(r, n);
            let b = (a + pick(r, 4)).min(n);
            p.splice(a..b, edge_varint(r));
        }
        4 => p.truncate(pick(r, n + 1)),
        5 => {
            let (a, b) = range(r, n);
            p.drain(a..b);
        }
        6 => {
            // Bytes from another payload (of this file or another seed): valid
            // encodings in the wrong place.
            let d = donors[pick(r, donors.len())];
            let (a, b) = range(r, d.len());
            let at = pick(r, n + 1);
            p.splice(at..at, d[a..b].iter().copied());
        }
        7 if n > 0 => {
            // Repeat a range many times: long runs of repeated items, deep tables.
            let (a, b) = range(r, n);
            let chunk = p[a..b].to_vec();
            for _ in 0..r.below(64) {
                p.splice(b..b, chunk.iter().copied());
            }
        }
        _ => {
            let at = pick(r, n + 1);
            let v = r.next_u64().to_le_bytes();
            p.splice(at..at, v[..pick(r, 9)].iter().copied());
        }
    }
}

/// Mutates the structure: frames, kinds, codecs, declared sizes.
fn mutate_frames(r: &mut Rng, parts: &mut Parts, donor_frames: &[Frame]) {
    let fr = &mut parts.frames;
    let n = fr.len();
    match r.below(8) {
        0 if n > 1 => fr.swap(pick(r, n), pick(r, n)),
        1 if n > 0 => {
            let f = fr[pick(r, n)].clone();
            fr.insert(pick(r, n + 1), f);
        }
        2 if n > 0 => {
            fr.remove(pick(r, n));
        }
        3 if !donor_frames.is_empty() => {
            let f = donor_frames[pick(r, donor_frames.len())].clone();
            fr.insert(pick(r, n + 1), f);
        }
        4 if n > 0 => fr[pick(r, n)].kind = [0, 1, 2, 3, 4, 0xff][pick(r, 6)],
        5 if n > 0 => {
            let f = &mut fr[pick(r, n)];
            f.codec = [CODEC_RAW, CODEC_ZSTD, 2, 0xff][pick(r, 4)];
        }
        6 if n > 0 => {
            let f = &mut fr[pick(r, n)];
            f.codec = CODEC_ZSTD;
            let len = f.payload.len() as u64;
            f.declared = Some(match r.below(4) {
                0 => len.saturating_sub(1),
                1 => len + 1,
                2 => 0,
                _ => r.next_u64() >> r.below(64),
            });
        }
        _ if n > 1 => {
            // The last frames lost, as a crash or a copy cut short leaves them.
            fr.truncate(1 + pick(r, n - 1));
        }
        _ => {}
    }
}

/// Damage to the file bytes themselves (no checksum fixed): the reader's
/// search after damage, and false frame starts.
fn damage(r: &mut Rng, f: &mut Vec<u8>) {
    let n = f.len();
    match r.below(5) {
        0 if n > 0 => f[pick(r, n)] ^= 1 << r.below(8),
        1 => f.truncate(pick(r, n + 1)),
        2 => {
            let at = pick(r, n + 1);
            f.splice(at..at, SYNC.iter().copied());
        }
        3 => {
            let (a, b) = range(r, n);
            let chunk = f[a..b].to_vec();
            let at = pick(r, n + 1);
            f.splice(at..at, chunk);
        }
        _ if n >= HEADER_LEN => f[MAGIC_LEN] = [0, 1, 2, 3, 0xff][pick(r, 5)],
        _ => {}
    }
}

/// One mutant of `seed_file`, decided wholly by `seed`; `others` lend frames
/// and bytes (other seed files).
pub fn mutate(seed_file: &[u8], seed: u64, others: &[Vec<u8>]) -> Vec<u8> {
    let mut r = Rng::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut parts = split(seed_file);
    let other = others.get(pick(&mut r, others.len())).map(|o| split(o));
    let donor_frames: Vec<Frame> = other.map(|o| o.frames).unwrap_or_default();
    for _ in 0..1 + r.below(4) {
        if r.below(4) == 0 || parts.frames.is_empty() {
            mutate_frames(&mut r, &mut parts, &donor_frames);
        } else {
            // Mostly snapshot frames: a broken session frame only gets the file refused.
            let n = parts.frames.len();
            let mut k = pick(&mut r, n);
            if parts.frames[k].kind == KIND_SESSION && n > 1 && r.below(8) != 0 {
                k = 1 + pick(&mut r, n - 1);
            }
            // Taken out while it changes, so the other payloads lend bytes uncopied.
            let mut p = std::mem::take(&mut parts.frames[k].payload);
            let donors: Vec<&[u8]> = parts
                .frames
                .iter()
                .chain(&donor_frames)
                .map(|f| f.payload.as_slice())
                .collect();
            mutate_payload(&mut r, &mut p, &donors);
            parts.frames[k].payload = p;
        }
    }
    let mut out = join(&parts);
    if r.below(8) == 0 {
        damage(&mut r, &mut out);
    }
    out
}
