//! xtop: active session history for Linux threads.
//!
//! `sampler` reads the kernel (BPF) into `model::Snapshot`s; `dimensions` is the
//! one registry of columns; `aggregation` groups samples; `output` writes text,
//! CSV and JSON; `ui` is the terminal front end.

pub mod aggregation;
pub mod dimensions;
pub mod model;
pub mod output;
pub mod value;
pub mod ui;
