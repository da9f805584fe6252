//! Parsing `/proc/PID/maps`: the executable mappings are what user stack
//! addresses fall into.

use std::ops::Range;
use std::sync::OnceLock;

/// One executable mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapLine {
    pub start: u64,
    pub end: u64,
    /// File offset of `start` (meaningless for anonymous mappings).
    pub offset: u64,
    pub kind: MapKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapKind {
    /// A file; `deleted` when it was unlinked (or replaced) since it was mapped.
    File {
        path: String,
        deleted: bool,
    },
    Vdso,
    /// No file behind it: JIT code, or anything else a runtime generated.
    Anon,
    /// `[vsyscall]` and other pseudo mappings nothing can name.
    Other,
}

/// Where this process has its vDSO. The kernel maps the same image into every
/// process of an architecture, so ours names and unwinds theirs.
pub fn own_vdso() -> Option<Range<u64>> {
    static OWN: OnceLock<Option<Range<u64>>> = OnceLock::new();
    OWN.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/self/maps").ok()?;
        parse(&text)
            .into_iter()
            .find(|m| m.kind == MapKind::Vdso)
            .map(|m| m.start..m.end)
    })
    .clone()
}

/// The executable mappings of `text` (the contents of a maps file), in order.
pub fn parse(text: &str) -> Vec<MapLine> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<MapLine> {
    let mut rest = line;
    let mut field = || {
        let t = rest.trim_start_matches(' ');
        let end = t.find(' ').unwrap_or(t.len());
        rest = &t[end..];
        Some(&t[..end]).filter(|f| !f.is_empty())
    };
    let (start, end) = field()?.split_once('-')?;
    let perms = field()?;
    let offset = field()?;
    let (_dev, _inode) = (field()?, field()?);
    if perms.as_bytes().get(2) != Some(&b'x') {
        return None;
    }
    let path = rest.trim_start_matches(' ');
    let kind = if path.is_empty() || path.starts_with("[anon") {
        MapKind::Anon
    } else if path == "[vdso]" {
        MapKind::Vdso
    } else if path.starts_with('/') {
        match path.strip_suffix(" (deleted)") {
            Some(p) => MapKind::File {
                path: p.to_string(),
                deleted: true,
            },
            None => MapKind::File {
                path: path.to_string(),
                deleted: false,
            },
        }
    } else {
        MapKind::Other
    };
    Some(MapLine {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        offset: u64::from_str_radix(offset, 16).ok()?,
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_executable_mappings_and_classifies_them() {
        let text = "\
55d3195b7000-55d3195b9000 r--p 00000000 00:12 2015701                    /bin/cat
55d3195b9000-55d3195be000 r-xp 00002000 00:12 2015701                    /bin/cat
7f0000000000-7f0000001000 rwxp 00000000 00:00 0 
7f0000002000-7f0000003000 r-xp 00001000 08:01 42                         /tmp/my lib.so (deleted)
7ffd1e7f0000-7ffd1e7f2000 r-xp 00000000 00:00 0                          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
garbage line
";
        let m = parse(text);
        assert_eq!(m.len(), 5);
        assert_eq!(
            m[0],
            MapLine {
                start: 0x55d3195b9000,
                end: 0x55d3195be000,
                offset: 0x2000,
                kind: MapKind::File {
                    path: "/bin/cat".into(),
                    deleted: false
                }
            }
        );
        assert_eq!(m[1].kind, MapKind::Anon);
        assert_eq!(
            m[2].kind,
            MapKind::File {
                path: "/tmp/my lib.so".into(),
                deleted: true
            }
        );
        assert_eq!(m[2].offset, 0x1000);
        assert_eq!(m[3].kind, MapKind::Vdso);
        assert_eq!(m[4].kind, MapKind::Other);
    }
}
