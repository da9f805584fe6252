use clap::{CommandFactory, Parser, Subcommand};
use xtop::recording::RecordingCommand;

#[derive(Parser)]
#[command(name = "xtop", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    #[command(flatten)]
    Recording(RecordingCommand),
}

fn main() {
    let result = match Cli::parse().command {
        Some(Command::Recording(c)) => c.run(),
        None => Cli::command().print_help().map_err(Into::into),
    };
    if let Err(err) = result {
        eprintln!("xtop: {err:#}");
        std::process::exit(1);
    }
}
