//! Block I/O: what a thread blocked on its own I/O waits for (the request it
//! started and that is still in flight: its disk, operation and size, from
//! the block layer's tracepoints), and the names the kernel gives both.

mod devices;

pub use devices::DeviceNames;

/// The name of a request's operation (the kernel's `REQ_OP_*`, the low byte
/// of `cmd_flags`), as blktrace and iostat spell it; `other` for codes newer
/// than this table.
pub fn op_name(op: u8) -> &'static str {
    match op {
        0 => "read",
        1 => "write",
        2 => "flush",
        3 => "discard",
        5 => "secure_erase",
        7 => "zone_append",
        9 => "write_zeroes",
        11 => "zone_open",
        13 => "zone_close",
        15 => "zone_finish",
        17 => "zone_reset",
        19 => "zone_reset_all",
        34 => "drv_in",
        35 => "drv_out",
        _ => "other",
    }
}

/// The kernel's internal dev_t (MKDEV: 12 bits of major, 20 of minor), as
/// major and minor.
pub fn split_dev(dev: u32) -> (u32, u32) {
    (dev >> 20, dev & 0xf_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_are_named_as_the_kernel_numbers_them() {
        assert_eq!(op_name(0), "read");
        assert_eq!(op_name(1), "write");
        assert_eq!(op_name(2), "flush");
        assert_eq!(op_name(9), "write_zeroes");
        assert_eq!(op_name(4), "other", "a gap in the kernel's numbering");
        assert_eq!(op_name(200), "other");
    }

    #[test]
    fn dev_t_splits_as_mkdev_builds_it() {
        assert_eq!(split_dev((254 << 20) | 16), (254, 16));
        assert_eq!(split_dev(0), (0, 0));
    }
}
