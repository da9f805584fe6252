//! Argument names for the system calls threads are most often found waiting
//! in, so the thread view can say `pread64(fd=3, buf=0x7f.., count=8192,
//! pos=0)` instead of six bare hex numbers. Unlisted calls show all six
//! arguments in hex: nothing is guessed.

/// How an argument reads best.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Small integers: descriptors, counts, flags-free sizes.
    Dec,
    /// Addresses and flag words.
    Hex,
    /// Signed (timeouts where -1 means forever).
    Signed,
}

use Kind::{Dec, Hex, Signed};

type Sig = &'static [(&'static str, Kind)];

const FD_BUF_COUNT: Sig = &[("fd", Dec), ("buf", Hex), ("count", Dec)];
const FD_BUF_COUNT_POS: Sig = &[("fd", Dec), ("buf", Hex), ("count", Dec), ("pos", Dec)];
const FD_IOV: Sig = &[("fd", Dec), ("iov", Hex), ("iovcnt", Dec)];
const FD_IOV_POS: Sig = &[("fd", Dec), ("iov", Hex), ("iovcnt", Dec), ("pos", Dec)];
const FD: Sig = &[("fd", Dec)];
const SOCK_MSG: Sig = &[("fd", Dec), ("msg", Hex), ("flags", Hex)];

fn signature(name: &str) -> Option<Sig> {
    Some(match name {
        "read" | "write" => FD_BUF_COUNT,
        "pread64" | "pwrite64" => FD_BUF_COUNT_POS,
        "readv" | "writev" => FD_IOV,
        "preadv" | "pwritev" | "preadv2" | "pwritev2" => FD_IOV_POS,
        "fsync" | "fdatasync" | "close" | "syncfs" => FD,
        "futex" => &[
            ("uaddr", Hex),
            ("op", Hex),
            ("val", Dec),
            ("timeout", Hex),
            ("uaddr2", Hex),
            ("val3", Hex),
        ],
        "epoll_wait" => &[
            ("epfd", Dec),
            ("events", Hex),
            ("maxevents", Dec),
            ("timeout_ms", Signed),
        ],
        "epoll_pwait" | "epoll_pwait2" => &[
            ("epfd", Dec),
            ("events", Hex),
            ("maxevents", Dec),
            ("timeout", Signed),
            ("sigmask", Hex),
        ],
        "poll" => &[("fds", Hex), ("nfds", Dec), ("timeout_ms", Signed)],
        "ppoll" => &[("fds", Hex), ("nfds", Dec), ("timeout", Hex), ("sigmask", Hex)],
        "select" | "pselect6" => &[
            ("nfds", Dec),
            ("readfds", Hex),
            ("writefds", Hex),
            ("exceptfds", Hex),
            ("timeout", Hex),
        ],
        "nanosleep" => &[("req", Hex), ("rem", Hex)],
        "clock_nanosleep" => &[("clock", Dec), ("flags", Hex), ("req", Hex), ("rem", Hex)],
        "accept" | "accept4" => &[("fd", Dec), ("addr", Hex), ("addrlen", Hex), ("flags", Hex)],
        "connect" => &[("fd", Dec), ("addr", Hex), ("addrlen", Dec)],
        "recvfrom" | "sendto" => &[
            ("fd", Dec),
            ("buf", Hex),
            ("len", Dec),
            ("flags", Hex),
            ("addr", Hex),
            ("addrlen", Hex),
        ],
        "recvmsg" | "sendmsg" => SOCK_MSG,
        "wait4" => &[
            ("pid", Signed),
            ("status", Hex),
            ("options", Hex),
            ("rusage", Hex),
        ],
        "io_getevents" => &[
            ("ctx", Hex),
            ("min_nr", Dec),
            ("nr", Dec),
            ("events", Hex),
            ("timeout", Hex),
        ],
        "io_uring_enter" => &[
            ("fd", Dec),
            ("to_submit", Dec),
            ("min_complete", Dec),
            ("flags", Hex),
        ],
        "openat" => &[("dirfd", Signed), ("path", Hex), ("flags", Hex), ("mode", Hex)],
        "flock" => &[("fd", Dec), ("op", Hex)],
        "fcntl" => &[("fd", Dec), ("cmd", Dec), ("arg", Hex)],
        "ioctl" => &[("fd", Dec), ("request", Hex), ("arg", Hex)],
        _ => return None,
    })
}

/// `name(arg=value, ...)`, with names and bases for known calls.
pub fn format_call(name: &str, args: &[u64; 6]) -> String {
    let parts: Vec<String> = match signature(name) {
        Some(sig) => sig
            .iter()
            .zip(args)
            .map(|((n, kind), v)| match kind {
                Dec => format!("{n}={v}"),
                Hex => format!("{n}={v:#x}"),
                Signed => format!("{n}={}", *v as i64),
            })
            .collect(),
        None => args.iter().map(|a| format!("{a:#x}")).collect(),
    };
    format!("{name}({})", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_calls_are_named_unknown_ones_are_hex() {
        let a = [3, 0x7ffd_0000, 4096, 8192, 9, 9];
        assert_eq!(
            format_call("pread64", &a),
            "pread64(fd=3, buf=0x7ffd0000, count=4096, pos=8192)"
        );
        let e = [5, 0x1000, 64, u64::MAX, 0, 0];
        assert_eq!(
            format_call("epoll_wait", &e),
            "epoll_wait(epfd=5, events=0x1000, maxevents=64, timeout_ms=-1)"
        );
        assert_eq!(
            format_call("mystery", &[1, 2, 3, 4, 5, 6]),
            "mystery(0x1, 0x2, 0x3, 0x4, 0x5, 0x6)"
        );
    }
}
