//! The cost of sampling passes as the sampler itself measures it, shared by
//! the benches that compare options.

use xtop::sampler::{Sampler, SamplerOptions};

pub fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Median walk and decode ns of 20 passes (after 5 to warm up), and the
/// most samples a pass emitted.
pub fn pass_cost_with(opts: SamplerOptions) -> (u64, u64, usize) {
    let s = Sampler::start(opts).expect("BPF must load: run as root");
    let snaps: Vec<_> = (0..25).map(|_| s.receiver().recv().unwrap()).skip(5).collect();
    s.stop().unwrap();
    let walk = median(snaps.iter().map(|x| x.cost.walk_ns).collect());
    let decode = median(snaps.iter().map(|x| x.cost.decode_ns).collect());
    let emitted = snaps.iter().map(|x| x.samples.len()).max().unwrap_or(0);
    (walk, decode, emitted)
}
