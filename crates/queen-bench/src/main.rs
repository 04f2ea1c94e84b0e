//! `queen-bench`: load generator for a Queen broker over HTTP v1.
//!
//! ```text
//! queen-bench push-pop --url http://127.0.0.1:6632 --messages 20000 --batch 100 \
//!     --producers 8 --consumers 8 --partitions 16 --payload-bytes 256 --json-out out.json
//! ```

mod api;
mod report;
mod scenario;
mod stats;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "queen-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Push N messages, then drain them with pop + ack/batch; report throughput and latency.
    PushPop(scenario::PushPopConfig),
}

#[tokio::main]
async fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::PushPop(cfg) => scenario::run_push_pop(cfg).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line with the whole cause chain; no backtrace even if RUST_BACKTRACE is set.
            eprintln!("queen-bench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
