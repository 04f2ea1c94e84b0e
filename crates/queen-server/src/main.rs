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
    Serve {
        /// Run a private PostgreSQL from this machine's binaries in DIR
        /// (created on first use, reachable only through a Unix socket there,
        /// stopped with the broker, kept across restarts) instead of
        /// connecting to PG_HOST/DATABASE_URL.
        #[arg(long, value_name = "DIR")]
        embedded_pg: Option<std::path::PathBuf>,
    },
    /// Apply database migrations and exit.
    Migrate,
    /// Validate the configuration from the environment, print it, and exit.
    CheckConfig,
}

fn main() -> std::process::ExitCode {
    // before any thread allocates: the allocator's parameters (memory.rs)
    queen_server::memory::tune();
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
            Command::Serve { embedded_pg } => serve(config, embedded_pg).await,
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

async fn serve(mut config: Config, embedded_pg: Option<std::path::PathBuf>) -> anyhow::Result<()> {
    let mut embedded = match embedded_pg {
        Some(dir) => {
            let pg = tokio::task::spawn_blocking(move || {
                queen_server::embedded_pg::EmbeddedPg::start(&dir)
            })
            .await??;
            pg.configure(&mut config.db);
            Some(pg)
        }
        None => None,
    };
    let result = serve_on(config).await;
    if let Some(pg) = embedded.as_mut() {
        pg.stop();
    }
    result
}

async fn serve_on(config: Config) -> anyhow::Result<()> {
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
        .map_err(|e| {
            if queen_server::store::is_foreign_schema(&e) {
                anyhow::anyhow!("{e}")
            } else {
                anyhow::anyhow!(
                    "cannot migrate PostgreSQL at {} ({e}): point the broker at a running server with PG_HOST/PG_PORT/PG_USER/PG_PASSWORD/PG_DB or DATABASE_URL",
                    config.db.target()
                )
            }
        })?;
    println!("migrations applied: {applied}");
    Ok(())
}
