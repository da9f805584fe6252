use std::process::ExitCode;

use clap::Parser;
use xtop::aggregation::Filter;
use xtop::cli::Cli;
use xtop::{batch, dimensions};

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
    // Until the interactive screen lands, plain `xtop` runs batch mode.
    let opts = batch::BatchOptions {
        count: cli.count,
        dims,
        filters,
        format: cli.format,
    };
    batch::run(cli.sampling.options(), opts)
}
