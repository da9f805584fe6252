//! What a thread's current syscall works on: which argument names a file
//! (`args`, the table the kernel side reads) and the name of what the kernel
//! side resolved (`name`). The sampler fills `ThreadSample::target` with it;
//! the `filename` dimension shows it.

pub mod args;
pub mod name;
