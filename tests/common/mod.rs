#![allow(dead_code)] // each test binary uses part of the helpers

pub mod kid;
pub mod limited;
pub mod markers;
pub mod mutate;
pub mod observe;
pub mod postgres;
pub mod programs;
pub mod pty;
pub mod workload;
