//! Which user frames are plumbing rather than the program's own code: the C
//! library and the language runtimes' syscall wrappers. A thread blocked in
//! `fdatasync` is better told by who called it (PostgreSQL's `pg_fsync`, not
//! glibc's `fdatasync`): that is `ustack_app`, the innermost frame that is not
//! plumbing, kept as the user stack's `top` (see `Stack::top`).

use super::process::Loc;

/// File names of the C runtime's shared libraries, by prefix: glibc (its libc,
/// libpthread, librt, libdl, libm and dynamic loader), musl's, and the C++ and
/// unwinding runtimes built on them.
const RUNTIME_LIBS: [&str; 11] = [
    "libc.so",
    "libc-",
    "libpthread",
    "librt.so",
    "libdl.so",
    "libm.so",
    "ld-linux",
    "ld64.so",
    "ld-musl",
    "libstdc++.so",
    "libgcc_s.so",
];

/// Crates of Rust's standard library, compiled into the program: its wrappers
/// (`std::thread::sleep`, `<&std::fs::File as std::io::Read>::read`) sit
/// between the program's code and the C library.
const RUNTIME_CRATES: [&str; 3] = ["std::", "core::", "alloc::"];

/// Whether a demangled name is a function of Rust's standard library: its
/// path, or the type of its trait impl, starts in std, core or alloc (an impl
/// of a std trait for the program's own type is the program's).
fn is_rust_std(name: &str) -> bool {
    let path = name.trim_start_matches(['<', '&']);
    let path = path.strip_prefix("mut ").unwrap_or(path);
    RUNTIME_CRATES.iter().any(|c| path.starts_with(c))
}

/// Whether a file is one of the C runtime's libraries (`libc.so.6`,
/// `libc.musl-x86_64.so.1`, `ld-linux-x86-64.so.2`, …).
pub fn is_runtime_lib(file_name: &str) -> bool {
    RUNTIME_LIBS.iter().any(|p| file_name.starts_with(p))
}

/// Whether the frame `name`, at `loc`, is plumbing: in a C runtime library, in
/// the vDSO, a signal trampoline's marker, or Rust's standard library.
pub fn is_plumbing(loc: &Loc, name: &str) -> bool {
    match loc {
        Loc::File { bin, .. } if is_runtime_lib(&bin.name) => true,
        Loc::Vdso(_) | Loc::Signal => true,
        _ => is_rust_std(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_libraries_by_file_name() {
        for lib in [
            "libc.so.6",
            "libc-2.31.so",
            "libpthread.so.0",
            "libm.so.6",
            "ld-linux-x86-64.so.2",
            "ld-linux-aarch64.so.1",
            "ld-musl-x86_64.so.1",
            "libstdc++.so.6.0.30",
            "libgcc_s.so.1",
        ] {
            assert!(is_runtime_lib(lib), "{lib}");
        }
        for other in [
            "postgres",
            "libpq.so.5",
            "libcrypto.so.3",
            "python3.11",
            "libcurl.so.4",
            "liblz4.so.1",
        ] {
            assert!(!is_runtime_lib(other), "{other}");
        }
    }

    #[test]
    fn rust_std_is_plumbing_the_program_is_not() {
        let jit = Loc::Jit(0x1000, None);
        assert!(is_plumbing(&jit, "std::thread::sleep"));
        assert!(is_plumbing(&jit, "<std::fs::File as std::io::Read>::read"));
        assert!(is_plumbing(
            &jit,
            "<&std::io::stdio::Stdin as std::io::Read>::read"
        ));
        assert!(is_plumbing(&jit, "<&mut std::fs::File as std::io::Read>::read"));
        assert!(!is_plumbing(&jit, "<myapp::Conn as std::io::Read>::read"));
        assert!(is_plumbing(&jit, "core::ptr::drop_in_place<x>"));
        assert!(!is_plumbing(&jit, "myapp::worker::run"));
        assert!(!is_plumbing(&jit, "XLogFlush"));
        assert!(is_plumbing(&Loc::Vdso(0x10), "clock_gettime"));
        assert!(is_plumbing(&Loc::Signal, "[signal]"));
    }
}
