use std::process::ExitCode;

use clap::Parser;
use xtop::aggregation::Filter;
use xtop::cli::Cli;
use xtop::sampler::Sampler;
use xtop::{batch, dimensions, ui};

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`xtop -b | head`), as Unix tools do.
    // SAFETY: restoring the default disposition of a signal.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtop: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    if let Some(cmd) = cli.command {
        return cmd.run();
    }
    if cli.list_dimensions {
        print!("{}", dimensions::describe_all());
        return Ok(());
    }
    let dims = dimensions::parse_list(&cli.group_by).map_err(anyhow::Error::msg)?;
    let filters = cli
        .filters
        .iter()
        .map(|f| Filter::parse(f))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    if cli.batch {
        let opts = batch::BatchOptions {
            count: cli.count,
            dims,
            filters,
            format: cli.format,
        };
        return batch::run(cli.sampling.options(), opts);
    }
    ui::require_terminal()?;
    let sampling = cli.sampling.options();
    let sampler = Sampler::start(sampling.clone())?;
    // Warnings raised while the screen is up show there, and stay for the
    // terminal after it (the toast is gone with the screen).
    let later = std::cell::RefCell::new(Vec::new());
    let source = ui::Source::Live {
        snapshots: sampler.receiver().clone(),
        all: sampling.all,
        set_all: Box::new(|all| sampler.set_all(all)),
        notices: Box::new(|| {
            let n = sampler.take_notices();
            later.borrow_mut().extend(n.iter().cloned());
            n
        }),
    };
    let warnings = sampler.warnings().to_vec();
    let opts = ui::UiOptions {
        warnings: warnings.clone(),
        ..cli.ui.options(dims, filters)
    };
    let shown = ui::run(source, sampler.session().clone(), opts);
    let sampled = sampler.stop();
    // Left on the terminal too: the screen's toast is gone with the screen.
    for w in warnings.iter().chain(later.borrow().iter()) {
        eprintln!("xtop: warning: {w}");
    }
    shown.and(sampled)
}
