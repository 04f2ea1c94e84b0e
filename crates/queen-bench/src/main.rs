//! `queen-bench`: load generator for a Queen broker over HTTP v1.
//!
//! ```text
//! # the whole suite: plain-SQL baselines, then every broker scenario on a
//! # freshly started broker each; table on stdout, JSON under bench-results/
//! queen-bench suite --broker-bin target/release/queen-server
//!
//! # the original single push-then-drain run against a running broker
//! queen-bench push-pop --url http://127.0.0.1:6632 --messages 20000 --batch 100 \
//!     --producers 8 --consumers 8 --partitions 16 --payload-bytes 256 --json-out out.json
//! ```

mod api;
mod baseline;
mod broker;
mod cases;
mod load;
mod meter;
mod nats;
mod peers;
mod pg;
mod procstat;
mod queen;
mod rabbitmq;
mod report;
mod results;
mod scenario;
mod stats;
mod suite;

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
    /// Plain-SQL baselines and every broker scenario (push, pop+ack, end-to-end,
    /// fan-out, long-poll wake on one broker and through the mesh).
    Suite(Box<suite::SuiteConfig>),
    /// Prints a saved suite report again (table or Markdown), optionally compared
    /// with an older one.
    Show(ShowArgs),
}

#[derive(Debug, clap::Args)]
struct ShowArgs {
    /// A report.json written by `suite`.
    report: std::path::PathBuf,
    /// Compare with this older report.
    #[arg(long)]
    baseline_json: Option<std::path::PathBuf>,
    #[arg(long, default_value_t = 10.0)]
    regression_pct: f64,
    #[arg(long, default_value_t = 50.0)]
    latency_regression_pct: f64,
    /// Markdown tables instead of the terminal table.
    #[arg(long)]
    markdown: bool,
}

fn show(args: &ShowArgs) -> anyhow::Result<bool> {
    let mut report = results::SuiteReport::read_json(&args.report)?;
    report.compute_ratios();
    report.compute_targets();
    if let Some(path) = &args.baseline_json {
        let previous = results::SuiteReport::read_json(path)?;
        report.compare(&previous, args.regression_pct, args.latency_regression_pct);
    }
    if args.markdown {
        print!("{}", report.markdown());
    } else {
        println!("{}", report.table());
    }
    Ok(true)
}

#[tokio::main]
async fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::PushPop(cfg) => scenario::run_push_pop(cfg).await.map(|()| true),
        Command::Suite(cfg) => suite::run_suite(*cfg).await,
        Command::Show(args) => show(&args),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            // One line with the whole cause chain; no backtrace even if RUST_BACKTRACE is set.
            eprintln!("queen-bench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
