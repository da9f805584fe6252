//! xtop: active session history for Linux threads.
//!
//! `sampler` reads the kernel (BPF) into `model::Snapshot`s; `dimensions` is the
//! one registry of columns; `filter` selects samples by their values and
//! `aggregation` groups them; `output`
//! writes tables, CSV and JSON; `batch` is `xtop -b`.

pub mod aggregation;
pub mod appwait;
pub mod atomic_file;
pub mod batch;
pub mod blockio;
pub mod cli;
pub mod dimensions;
pub mod filter;
pub mod model;
pub mod output;
pub mod recording;
pub mod sampler;
pub mod symbols;
pub mod target;
pub mod ui;
pub mod unwind;
pub mod value;
