//! End to end: kernel and user stacks of the workload's threads, off CPU (read
//! at pass time) and on CPU (from the profile). Needs root; CI runs it as root.
#![cfg(target_arch = "x86_64")] // the workload's markers issue x86-64 syscalls inline

mod common;

use common::observe::*;
use common::workload as w;
use xtop::sampler::SamplerOptions;

fn dump(obs: &[StackObs]) -> String {
    obs.iter()
        .map(|o| format!("{} k={:?} u={:?}\n", o.state, o.kframes(), o.uframes()))
        .collect()
}

fn of<'a>(by: &'a std::collections::HashMap<String, Vec<StackObs>>, comm: &str) -> &'a [StackObs] {
    by.get(comm).map_or(&[], |v| v)
}

#[test]
fn running_thread_stacks_come_from_the_profile() {
    let Some(_live) = live_workload() else { return };
    // A stack is shown only if the profile caught the thread since it last got
    // the CPU: at 1 kHz that happens even on a busy test machine, where the
    // spinner's stints on its CPU are short.
    let by = sample_stacks(
        SamplerOptions {
            profile_hz: 1000,
            ..opts(false)
        },
        30,
    );
    let run: Vec<&StackObs> = of(&by, w::SPIN).iter().filter(|o| o.state == "RUN").collect();
    assert!(
        run.iter().any(|o| o.ustack.is_some()),
        "no running sample with a stack: {}",
        dump(of(&by, w::SPIN))
    );
    for o in run.iter().filter(|o| o.ustack.is_some()) {
        assert!(o.user_has("xt_spin_marker"), "{}", dump(&[(*o).clone()]));
    }
    // Without the profile a running thread has no stack at all: the stacks above came from it.
    let by = sample_stacks(
        SamplerOptions {
            profile_hz: 0,
            ..opts(false)
        },
        10,
    );
    let run: Vec<&StackObs> = of(&by, w::SPIN).iter().filter(|o| o.state == "RUN").collect();
    assert!(!run.is_empty());
    assert!(
        run.iter().all(|o| o.kstack.is_none() && o.ustack.is_none()),
        "{}",
        dump(of(&by, w::SPIN))
    );
}

#[test]
fn a_preempted_spinner_keeps_its_stack_across_slices() {
    let Some(_live) = live_workload() else { return };
    // At the default profile rate a busy CPU's slices are often shorter than the
    // profile period: a running sample still gets the stack the profile took
    // earlier in the interval, since the thread was only preempted, never blocked.
    // How often the spinner is on its CPU at pass time varies a lot from run to
    // run here (7 to 39 of 40 passes; other threads wake on that CPU): sample
    // until it was seen running 20 times.
    let sampler = start_sampler(opts(false));
    let mut obs: Vec<StackObs> = Vec::new();
    for _ in 0..10 {
        obs.extend(of(&read_stacks(&sampler, 20), w::SPIN).iter().cloned());
        if obs.iter().filter(|o| o.state == "RUN").count() >= 20 {
            break;
        }
    }
    sampler.stop().unwrap();
    let run: Vec<&StackObs> = obs.iter().filter(|o| o.state == "RUN").collect();
    let with = run.iter().filter(|o| o.ustack.is_some()).count();
    assert!(
        run.len() >= 10 && with * 2 >= run.len(),
        "{with} of {} running samples with a stack: {}",
        run.len(),
        dump(&obs)
    );
    for o in run.iter().filter(|o| o.ustack.is_some()) {
        assert!(o.user_has("xt_spin_marker"), "{}", dump(&[(*o).clone()]));
    }
}

#[test]
fn sleeper_shows_the_nanosleep_path_and_its_caller() {
    let Some(_live) = live_workload() else { return };
    // The sleeper never runs: after the first pass its stacks are reused (XF_STACK_SAME), and
    // must still be there in every pass.
    let by = sample_stacks(opts(true), 5);
    let obs = of(&by, w::SLEEP);
    assert!(obs.len() >= 5, "{}", dump(obs));
    assert!(!obs.is_empty(), "sleeper not reported");
    for o in obs {
        assert!(
            o.kernel_has(&["do_nanosleep", "hrtimer_nanosleep"]),
            "{}",
            dump(obs)
        );
        let u = o.uframes();
        assert_eq!(u.first().map(|f| &**f), Some("xt_sleep_marker"), "{}", dump(obs));
        assert!(!o.ustack.as_ref().unwrap().cut_short(), "{}", dump(obs));
    }
}

#[test]
fn direct_io_reader_waits_in_block_io() {
    let Some(_live) = live_workload() else { return };
    // Enough passes for a dozen DISK samples or more: the shares asserted
    // below are of a rare event, and a handful of samples made them flaky
    // (5 of 7 user stacks failed the 3/4 once in CI).
    let by = sample_stacks(opts(false), 40);
    let obs = of(&by, w::DIO);
    let disk: Vec<&StackObs> = obs.iter().filter(|o| o.state == "DISK").collect();
    assert!(!disk.is_empty(), "reader never in DISK: {}", dump(obs));
    // A reader whose I/O completes while it is being unwound ran meanwhile: its
    // stacks are dropped, never mixed. That is rare; a wrong stack never is.
    let with: Vec<&StackObs> = disk.iter().copied().filter(|o| o.kstack.is_some()).collect();
    assert!(with.len() * 4 >= disk.len() * 3, "{}", dump(obs));
    for o in &with {
        assert!(
            o.kernel_has(&[
                "io_schedule",
                "iomap_dio_rw",
                "blkdev_read_iter",
                "submit_bio_wait"
            ]),
            "{}",
            dump(obs)
        );
    }
    // The user stack is copied after the kernel one and dropped alone when the
    // reader ran during its copy (the kernel stack, taken before, is whole).
    // So: rarely missing, and never another place than the reader's.
    let with_user: Vec<&&StackObs> = with.iter().filter(|o| o.ustack.is_some()).collect();
    assert!(with_user.len() * 4 >= with.len() * 3, "{}", dump(obs));
    for o in with_user {
        assert!(o.user_has("xt_dio_marker"), "{}", dump(obs));
    }
}

#[test]
fn no_user_stacks_means_none() {
    let Some(_live) = live_workload() else { return };
    let by = sample_stacks(
        SamplerOptions {
            user_stacks: false,
            ..opts(true)
        },
        5,
    );
    assert!(
        by.values().flatten().all(|o| o.ustack.is_none()),
        "user stack despite --no-user-stacks"
    );
    // Kernel stacks are still there.
    assert!(of(&by, w::SLEEP)
        .iter()
        .all(|o| o.kernel_has(&["do_nanosleep", "hrtimer_nanosleep"])));
}

#[test]
fn a_walk_that_cannot_reach_the_root_is_marked_truncated() {
    let Some(_live) = live_workload() else { return };
    let by = sample_stacks(opts(true), 5);
    let obs = of(&by, w::BADFP);
    assert!(!obs.is_empty(), "bad-frame-pointer thread not reported");
    for o in obs {
        let u = o
            .ustack
            .as_ref()
            .unwrap_or_else(|| panic!("no user stack: {}", dump(obs)));
        assert!(u.truncated(), "{}", dump(obs));
        assert_eq!(&*u.frames[0], "xt_badfp_marker", "{}", dump(obs));
    }
}

/// Brings a CPU back online when dropped, even if the test panics.
struct Offline(String);

impl Drop for Offline {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.0, "1");
    }
}

#[test]
fn the_profile_survives_cpu_hotplug() {
    let Some(_serial) = live_bpf() else { return };
    let cpu = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
    if cpu == 0 {
        eprintln!("skipping: CPU hotplug needs a second CPU");
        return;
    }
    let sampler = start_sampler(SamplerOptions {
        profile_hz: 1000,
        ..opts(false)
    });
    // A CPU taken offline loses its per-CPU perf events for good, even once it
    // is back: xtop must notice and re-arm it, or running threads there would
    // silently have no stacks.
    let path = format!("/sys/devices/system/cpu/cpu{cpu}/online");
    {
        if std::fs::write(&path, "0").is_err() {
            eprintln!("skipping: CPU {cpu} cannot be taken offline here");
            return;
        }
        let _back = Offline(path.clone());
        read_stacks(&sampler, 5);
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap().trim(),
        "1",
        "CPU {cpu} back online"
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinner = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("xt_hotplug".into())
            .spawn(move || {
                w::pin_to_cpu(cpu);
                common::markers::xt_spin_marker(&stop)
            })
            .unwrap()
    };
    // The profile is checked once a second: after that, running samples carry stacks.
    read_stacks(&sampler, 15);
    let by = read_stacks(&sampler, 20);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spinner.join().unwrap();
    sampler.stop().unwrap();
    let obs = of(&by, "xt_hotplug");
    let run: Vec<&StackObs> = obs.iter().filter(|o| o.state == "RUN").collect();
    let with = run.iter().filter(|o| o.user_has("xt_spin_marker")).count();
    assert!(
        run.len() >= 10 && with * 2 >= run.len(),
        "{with} of {} running samples on the re-onlined CPU with a stack: {}",
        run.len(),
        dump(obs)
    );
}
