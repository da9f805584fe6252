//! What a thread's current syscall works on: which argument names a file
//! (`args`, the table the kernel side reads), the name of what the kernel
//! side resolved (`name`) and, for sockets, what they connect (`socket`).
//! The sampler fills `ThreadSample::target` with it; the `filename`,
//! `connection` and `conn_state` dimensions show it.

pub mod args;
pub mod name;
pub mod socket;
