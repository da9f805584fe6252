//! A binary's call frame information (CFI): the `.eh_frame` (with its
//! `.eh_frame_hdr` search table) and `.debug_frame` sections that say, for
//! every instruction, where the caller's registers and return address are.
//! Read once per binary (by build-id, through `Binary::key`), only the
//! sections unwinding needs, never the whole file.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
use object::{Object, ObjectSection, ReadCache, ReadRef};

#[cfg(target_arch = "x86_64")]
const NATIVE_MACHINE: u16 = object::elf::EM_X86_64;
#[cfg(target_arch = "aarch64")]
const NATIVE_MACHINE: u16 = object::elf::EM_AARCH64;

/// The largest page size a loader rounds segment offsets down to (64 KiB on
/// some aarch64 kernels).
const MAX_PAGE: u64 = 0x10000;

/// Section bytes, shared by every process that maps the binary.
pub type Bytes = Arc<[u8]>;

/// What unwinding needs of one ELF file. Addresses are as the file states
/// them (SVMAs); a process maps them at some bias.
#[derive(Debug)]
pub struct Cfi {
    pub eh_frame: Option<(Range<u64>, Bytes)>,
    pub eh_frame_hdr: Option<(Range<u64>, Bytes)>,
    pub debug_frame: Option<Bytes>,
    pub text: Option<Range<u64>>,
    pub got: Option<Range<u64>>,
    /// Code ranges whose CFI marks them signal trampolines (glibc's
    /// `__restore_rt`): a handler returns there, and the interrupted code's
    /// registers are in the signal frame on the stack, which CFI alone cannot
    /// say how to read.
    pub sigreturn: Vec<Range<u64>>,
    /// Loadable segments as (file offset, virtual address, file size,
    /// executable): how a mapping's file offset becomes the address the CFI
    /// speaks of.
    loads: Vec<(u64, u64, u64, bool)>,
}

impl Cfi {
    /// Reads the CFI of the ELF file at `path`. None if it is not a 64-bit
    /// little-endian ELF or cannot be read.
    pub fn read(path: &Path) -> Option<Cfi> {
        Cfi::parse(&ReadCache::new(File::open(path).ok()?))
    }

    /// The CFI of an ELF image already in memory (the vDSO's).
    pub fn from_image(image: &[u8]) -> Option<Cfi> {
        Cfi::parse(image)
    }

    fn parse<'d, R: ReadRef<'d>>(data: R) -> Option<Cfi> {
        let elf = ElfFile64::<object::LittleEndian, _>::parse(data).ok()?;
        let section = |name: &str| {
            let s = elf.section_by_name(name)?;
            let range = s.address()..s.address() + s.size();
            // SHT_NOBITS (a stripped debug file's placeholders) have no data.
            let data = s.data().ok().filter(|d| !d.is_empty())?;
            Some((range, Arc::<[u8]>::from(data)))
        };
        let range = |name: &str| {
            let s = elf.section_by_name(name)?;
            Some(s.address()..s.address() + s.size())
        };
        let endian = elf.endian();
        let loads = elf
            .elf_program_headers()
            .iter()
            .filter(|p| p.p_type(endian) == object::elf::PT_LOAD)
            .map(|p| {
                let exec = p.p_flags(endian) & object::elf::PF_X != 0;
                (p.p_offset(endian), p.p_vaddr(endian), p.p_filesz(endian), exec)
            })
            .collect();
        // Another architecture's binary (qemu-user, say) has rules for other registers.
        if elf.elf_header().e_machine(endian) != NATIVE_MACHINE {
            return None;
        }
        let eh_frame = section(".eh_frame");
        let sigreturn = eh_frame
            .as_ref()
            .map(|(range, data)| signal_trampolines(range.start, data))
            .unwrap_or_default();
        Some(Cfi {
            sigreturn,
            eh_frame,
            eh_frame_hdr: section(".eh_frame_hdr"),
            debug_frame: section(".debug_frame").map(|(_, d)| d),
            text: range(".text"),
            got: range(".got"),
            loads,
        })
    }

    /// Whether there is anything to unwind with.
    pub fn is_empty(&self) -> bool {
        self.eh_frame.is_none() && self.debug_frame.is_none()
    }

    /// The load bias of an executable mapping of file `offset` at `start`:
    /// the CFI's address `a` is at `a + bias` in the process. The loader maps
    /// a segment from its offset rounded down to a page, so the mapping may
    /// start before the segment (lld leaves such gaps between file offset and
    /// address; GNU ld mostly does not).
    pub fn bias(&self, start: u64, offset: u64) -> Option<u64> {
        let &(p_offset, p_vaddr, _, _) = self.loads.iter().find(|&&(o, _, size, exec)| {
            exec && offset < o.saturating_add(size.max(1)) && o.saturating_sub(offset) < MAX_PAGE
        })?;
        let svma = p_vaddr.wrapping_add(offset).wrapping_sub(p_offset);
        Some(start.wrapping_sub(svma))
    }

    /// Bytes held: what the table cache counts against its budget.
    pub fn size(&self) -> usize {
        let len = |d: &Option<(Range<u64>, Bytes)>| d.as_ref().map_or(0, |(_, b)| b.len());
        len(&self.eh_frame) + len(&self.eh_frame_hdr) + self.debug_frame.as_ref().map_or(0, |d| d.len())
    }
}

/// The code ranges of `.eh_frame` (at address `svma`) whose entries are
/// signal trampolines: their CIE's augmentation has 'S'. Few binaries have any
/// (the C library); for the rest this reads only entry headers.
fn signal_trampolines(svma: u64, data: &[u8]) -> Vec<Range<u64>> {
    use gimli::{BaseAddresses, CieOrFde, EhFrame, NativeEndian, UnwindSection};
    let eh = EhFrame::new(data, NativeEndian);
    let bases = BaseAddresses::default().set_eh_frame(svma);
    let mut entries = eh.entries(&bases);
    let mut signal_cies = Vec::new();
    let mut out = Vec::new();
    // A corrupt entry ends the scan: the trampolines found so far stay.
    while let Ok(Some(entry)) = entries.next() {
        match entry {
            CieOrFde::Cie(cie) if cie.is_signal_trampoline() => signal_cies.push(cie.offset()),
            CieOrFde::Cie(_) => {}
            CieOrFde::Fde(partial) => {
                if !signal_cies.contains(&partial.cie_offset().0) {
                    continue;
                }
                if let Ok(fde) = partial.parse(|s, b, o| s.cie_from_offset(b, o)) {
                    out.push(fde.initial_address()..fde.end_address());
                }
            }
        }
    }
    out
}

/// CFI of every binary seen, by `Binary::key` (build-id), within a byte budget:
/// past it the least recently used tables are dropped (processes still
/// unwinding with them keep their `Arc` until they are rebuilt).
pub struct CfiTables {
    by_key: HashMap<u64, (Option<Arc<Cfi>>, u64)>,
    bytes: usize,
    budget: usize,
    clock: u64,
}

impl CfiTables {
    pub fn new(budget: usize) -> Self {
        CfiTables {
            by_key: HashMap::new(),
            bytes: 0,
            budget,
            clock: 0,
        }
    }

    /// The CFI of binary `key`, read from `source` the first time. A binary
    /// without CFI is remembered as such (None), so it is not read again.
    pub fn get(&mut self, key: u64, source: impl FnOnce() -> Option<Cfi>) -> Option<Arc<Cfi>> {
        self.clock += 1;
        if let Some((cfi, used)) = self.by_key.get_mut(&key) {
            *used = self.clock;
            return cfi.clone();
        }
        let cfi = source().filter(|c| !c.is_empty()).map(Arc::new);
        self.bytes += cfi.as_ref().map_or(0, |c| c.size());
        self.by_key.insert(key, (cfi.clone(), self.clock));
        self.evict();
        cfi
    }

    /// Drops the oldest tables until the budget holds (the newest always stays).
    fn evict(&mut self) {
        if self.bytes <= self.budget {
            return;
        }
        let mut by_age: Vec<(u64, u64, usize)> = self
            .by_key
            .iter()
            .map(|(&k, (c, used))| (*used, k, c.as_ref().map_or(0, |c| c.size())))
            .collect();
        by_age.sort_unstable();
        for (used, key, size) in by_age {
            if self.bytes <= self.budget || used == self.clock {
                break;
            }
            self.by_key.remove(&key);
            self.bytes -= size;
        }
    }

    /// Bytes of CFI held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}
