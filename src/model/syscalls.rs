//! Syscall number to name, for the architectures xtop can sample or replay.

#[path = "syscall_tables.rs"]
mod tables;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    X86_64,
    Aarch64,
}

impl Arch {
    pub const fn native() -> Arch {
        if cfg!(target_arch = "aarch64") {
            Arch::Aarch64
        } else {
            Arch::X86_64
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        }
    }

    pub fn from_name(name: &str) -> Option<Arch> {
        [Arch::X86_64, Arch::Aarch64]
            .into_iter()
            .find(|a| a.name() == name)
    }

    /// The syscall's name, or None for a number this table does not know.
    pub fn syscall_name(self, nr: u32) -> Option<&'static str> {
        let table: &[&str] = match self {
            Arch::X86_64 => &tables::X86_64,
            Arch::Aarch64 => &tables::AARCH64,
        };
        table.get(nr as usize).copied().filter(|n| !n.is_empty())
    }

    pub fn syscall_nr(self, name: &str) -> Option<u32> {
        (0..1024).find(|&nr| self.syscall_name(nr) == Some(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x86_64_numbers() {
        let a = Arch::X86_64;
        assert_eq!(a.syscall_name(0), Some("read"));
        assert_eq!(a.syscall_name(35), Some("nanosleep"));
        assert_eq!(a.syscall_name(110), Some("getppid"));
        assert_eq!(a.syscall_name(230), Some("clock_nanosleep"));
        assert_eq!(a.syscall_name(202), Some("futex"));
        assert_eq!(a.syscall_name(435), Some("clone3"));
        assert_eq!(a.syscall_name(462), Some("mseal"));
        assert_eq!(a.syscall_name(335), None); // unassigned gap
        assert_eq!(a.syscall_name(100_000), None);
    }

    #[test]
    fn aarch64_numbers() {
        let a = Arch::Aarch64;
        assert_eq!(a.syscall_name(63), Some("read"));
        assert_eq!(a.syscall_name(79), Some("newfstatat"));
        assert_eq!(a.syscall_name(101), Some("nanosleep"));
        assert_eq!(a.syscall_name(115), Some("clock_nanosleep"));
        assert_eq!(a.syscall_name(173), Some("getppid"));
        assert_eq!(a.syscall_name(244), None);
        assert_eq!(a.syscall_nr("futex"), Some(98));
    }
}
