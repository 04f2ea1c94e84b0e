//! `queen-server serve | migrate | check-config`.

use clap::{Parser, Subcommand};
use queen_server::config::{Config, ProcessEnv};
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(
    name = "queen-server",
    version,
    about = "Queen message broker on PostgreSQL"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker (applies migrations at start).
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Validate the configuration from the environment, print it, and exit.
    CheckConfig,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let config = match Config::from_env(&ProcessEnv) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("queen-server: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    queen_server::telemetry::init(&config.log_level, config.log_format_json);
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = config.worker_threads {
        builder.worker_threads(n.get());
    }
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("queen-server: cannot start runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve => serve(config).await,
            Command::Migrate => migrate(config).await,
            Command::CheckConfig => {
                println!("{}", config.describe());
                Ok(())
            }
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("queen-server: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn serve(config: Config) -> anyhow::Result<()> {
    let addr = (config.host, config.port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}:{}: {e}", addr.0, addr.1))?;
    let shutdown = CancellationToken::new();
    let signal = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown requested");
        signal.cancel();
    });
    queen_server::run(config, listener, shutdown).await
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            let _ = ctrl_c.await;
            return;
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

async fn migrate(config: Config) -> anyhow::Result<()> {
    let store = queen_server::store::Store::new(&config.db)?;
    let applied = store
        .migrate()
        .await
        .map_err(|e| anyhow::anyhow!("{e}; point the broker at PostgreSQL with PG_HOST/PG_PORT/PG_USER/PG_PASSWORD/PG_DB or DATABASE_URL"))?;
    println!("migrations applied: {applied}");
    Ok(())
}
