//! The recording reader under libFuzzer: each input goes through what
//! `report`, `export` and `replay` do with a file. The mutator is the fuzz
//! test's (tests/common/mutate.rs): it edits frames inside and makes their
//! checksums valid again, so inputs reach the decoder instead of stopping at
//! a CRC; libFuzzer's own byte mutations still run for one input in four.

#![no_main]

use libfuzzer_sys::{fuzz_mutator, fuzz_target};

#[path = "../../tests/common/mutate.rs"]
mod mutate;

fuzz_target!(|data: &[u8]| {
    xtop::recording::fuzz::read_bytes(data.to_vec());
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    if seed % 4 == 0 {
        return libfuzzer_sys::fuzzer_mutate(data, size, max_size);
    }
    let out = mutate::mutate(&data[..size], u64::from(seed), &[]);
    if out.len() > max_size {
        return libfuzzer_sys::fuzzer_mutate(data, size, max_size);
    }
    data[..out.len()].copy_from_slice(&out);
    out.len()
});
