//! Compiles the BPF C in `src/bpf` into a libbpf-rs skeleton (CO-RE, using the
//! committed `vmlinux.h`, so the build host needs clang but no BTF).
use std::{env, path::PathBuf};

use libbpf_cargo::SkeletonBuilder;

const SRC: &str = "src/bpf/xtop.bpf.c";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR set by cargo")).join("xtop.skel.rs");
    let arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok("aarch64") => "arm64",
        Ok(other) => panic!("xtop's BPF programs support x86_64 and aarch64, not {other}"),
        Err(_) => "x86",
    };
    SkeletonBuilder::new()
        .source(SRC)
        .clang_args([
            format!("-D__TARGET_ARCH_{arch}"),
            "-Isrc/bpf".into(),
            "-Wall".into(),
        ])
        .build_and_generate(&out)
        .unwrap_or_else(|e| panic!("building {SRC}: {e:#}"));
    println!("cargo:rerun-if-changed=src/bpf");
}
