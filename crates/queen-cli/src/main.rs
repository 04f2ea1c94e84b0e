//! `queen`: the command line of a Queen broker, over `queen-client`.

mod admin;
mod cli;
mod consume;
mod output;
mod push;

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser};
use queen_client::Client;

use cli::{Cli, Command};
use output::Failure;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // help and version go to stdout with status 0; usage errors are status 2
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("queen: error: start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let outcome = runtime.block_on(run(cli));
    let _ = std::io::stdout().flush();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(),
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    if let Command::Completion(args) = &cli.command {
        let mut cmd = Cli::command();
        clap_complete::generate(args.shell, &mut cmd, "queen", &mut std::io::stdout());
        return Ok(());
    }
    let mut builder = Client::builder()
        .urls(cli.url.iter().map(|u| u.trim()).filter(|u| !u.is_empty()))
        .timeout(Duration::from_secs(cli.timeout.max(1)));
    if let Some(token) = cli.token.as_deref().filter(|t| !t.is_empty()) {
        builder = builder.token(token);
    }
    let client = builder.build()?;
    let json = cli.json;
    match cli.command {
        Command::Status => admin::status(&client, json).await,
        Command::Queues(args) => admin::queues(&client, args.command, json).await,
        Command::Push(args) => push::run(&client, args, json).await,
        Command::Pop(args) => consume::pop(&client, args, json).await,
        Command::Tail(args) => consume::tail(&client, args, json).await,
        Command::Ack(args) => consume::ack(&client, args, json).await,
        Command::Dlq(cmd) => admin::dlq(&client, cmd, json).await,
        Command::Groups(cmd) => admin::groups(&client, cmd, json).await,
        Command::Maintenance(args) => admin::maintenance(&client, args, json).await,
        Command::Messages(cmd) => admin::messages(&client, cmd, json).await,
        Command::Traces(cmd) => admin::traces(&client, cmd, json).await,
        Command::Metrics(args) => admin::metrics(&client, args, json).await,
        Command::Completion(_) => Ok(()),
    }
}
