//! `queen`: the command line of a Queen broker, over `queen-client`.

mod admin;
mod analytics;
mod apply;
mod cli;
mod config;
mod consume;
mod ephemeral;
mod help;
mod kv;
mod output;
mod push;
mod timers;
mod tx;
mod when;

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches as _};
use queen_client::Client;

use cli::{Cli, Command};
use output::Failure;

fn main() -> ExitCode {
    let parsed = help::command(Cli::command())
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            // help and version go to stdout with status 0; usage errors are user errors (1)
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(1)
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
    let outcome = runtime.block_on(run(cli, &matches));
    let _ = std::io::stdout().flush();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(),
    }
}

/// The value of a global option when it was typed on this command line.
fn typed<T: Clone>(matches: &ArgMatches, id: &str, value: Option<T>) -> Option<T> {
    let mut m = matches;
    while let Some((_, sub)) = m.subcommand() {
        m = sub;
    }
    (m.value_source(id) == Some(ValueSource::CommandLine)
        || matches.value_source(id) == Some(ValueSource::CommandLine))
    .then_some(value)
    .flatten()
}

async fn run(cli: Cli, matches: &ArgMatches) -> Result<(), Failure> {
    let out = cli.format();
    match &cli.command {
        Command::Completion(args) => {
            let mut cmd = help::command(Cli::command());
            clap_complete::generate(args.shell, &mut cmd, "queen", &mut std::io::stdout());
            return Ok(());
        }
        Command::Config(cmd) => {
            let url = typed(matches, "url", Some(cli.url.join(",")));
            let token = typed(matches, "token", cli.token.clone());
            return config::run(cmd.clone(), url, token, out);
        }
        Command::Apply(args) if args.dry_run => return apply::dry_run(args, out),
        _ => {}
    }
    let file = config::ConfigFile::load(&config::path()?)?;
    let target = config::resolve(
        config::Given {
            urls: cli.url.clone(),
            token: cli.token.clone(),
            queue: std::env::var("QUEEN_QUEUE").ok(),
            context: cli.context.clone(),
        },
        &file,
    )?;
    let mut builder = Client::builder()
        .urls(target.urls.iter().map(String::as_str))
        .timeout(Duration::from_secs(cli.timeout.max(1)));
    if let Some(token) = &target.token {
        builder = builder.token(token.as_str());
    }
    let client = builder.build()?;
    let queue = |q: Option<String>| {
        q.or_else(|| target.queue.clone()).ok_or_else(|| {
            Failure::Usage(
                "name a queue (or set QUEEN_QUEUE, or a default queue in the context)".into(),
            )
        })
    };
    match cli.command {
        Command::Status => admin::status(&client, out).await,
        Command::Queues(args) => admin::queues(&client, args.command, out).await,
        Command::Apply(args) => apply::run(&client, &args, out).await,
        Command::Push(args) => push::run(&client, args, out).await,
        Command::Pop(mut args) => {
            args.consume.queue = Some(queue(args.consume.queue.take())?);
            consume::pop(&client, args, out).await
        }
        Command::Tail(mut args) => {
            args.consume.queue = Some(queue(args.consume.queue.take())?);
            consume::tail(&client, args, out).await
        }
        Command::Ack(args) => consume::ack(&client, args, out).await,
        Command::Tx(args) => tx::run(&client, &args, out).await,
        Command::Lease(cmd) => tx::lease(&client, cmd, out).await,
        Command::Dlq(cmd) => admin::dlq(&client, cmd, out).await,
        Command::Groups(cmd) => admin::groups(&client, cmd, out).await,
        Command::Maintenance(args) => admin::maintenance(&client, args, out).await,
        Command::Messages(cmd) => admin::messages(&client, cmd, out).await,
        Command::Traces(cmd) => admin::traces(&client, cmd, out).await,
        Command::Metrics(args) => admin::metrics(&client, args, out).await,
        Command::Kv(cmd) => kv::kv(&client, cmd, out).await,
        Command::Locks(cmd) => kv::locks(&client, cmd, out).await,
        Command::Timers(cmd) => timers::run(&client, cmd, out).await,
        Command::Ephemeral(cmd) => ephemeral::run(&client, cmd, out).await,
        Command::Streams(cmd) => ephemeral::streams(&client, cmd, out).await,
        Command::Analytics(cmd) => analytics::run(&client, cmd, out).await,
        Command::Completion(_) | Command::Config(_) => Ok(()),
    }
}
