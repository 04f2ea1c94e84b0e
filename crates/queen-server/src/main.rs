//! `queen-server serve | migrate | import | check-config`.

use clap::{Parser, Subcommand};
use queen_server::config::{Config, ProcessEnv};
use tokio_util::sync::CancellationToken;

/// `--version`: the release and the commit it was built from.
const LONG_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("QUEEN_COMMIT"), ")");

#[derive(Parser)]
#[command(
    name = "queen-server",
    version = LONG_VERSION,
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
    /// Import a reference Queen 0.15 database into this broker's (the one
    /// PG_*/DATABASE_URL names); run again, it imports only what is new.
    /// See docs/migrating.md.
    Import(ImportArgs),
    /// Validate the configuration from the environment, print it, and exit.
    CheckConfig,
}

#[derive(clap::Args)]
struct ImportArgs {
    /// The reference database, as a PostgreSQL URL
    /// (postgres://user:password@host:port/dbname); may be this broker's
    /// own database when the reference's schema was renamed (--schema).
    #[arg(long, value_name = "URL")]
    from: String,
    /// The schema holding the reference's tables there.
    #[arg(long, value_name = "NAME", default_value = "queen")]
    schema: String,
    /// Print what would be imported, per queue, and what cannot be (with
    /// why); write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the report as JSON on stdout (no progress bar).
    #[arg(long)]
    json: bool,
    /// Partitions imported at the same time.
    #[arg(long, value_name = "N", default_value_t = 2)]
    jobs: usize,
    /// Seconds before the last run's end that a catch-up reads again, for
    /// messages the reference committed late.
    #[arg(long, value_name = "SECONDS", default_value_t = queen_server::import::DEFAULT_OVERLAP_SECS)]
    overlap_secs: u64,
    /// Messages read from the source per page (and written per call).
    #[arg(long, value_name = "N", default_value_t = queen_server::import::DEFAULT_PAGE)]
    page: i64,
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
            Command::Import(args) => import(config, args).await,
            Command::CheckConfig => {
                println!("{}", config.describe());
                Ok(())
            }
        }
    });
    // a blocking task still running (a spool fsync, a child process) does not hold the exit
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
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
    let mut signals = StopSignals::new()?;
    tokio::spawn(async move {
        signals.next().await;
        tracing::info!("shutdown requested: draining (a second signal stops at once)");
        signal.cancel();
        signals.next().await;
        tracing::warn!("second signal: stopping at once");
        // every push answered was already made durable (PostgreSQL or the fsynced spool)
        std::process::exit(EXIT_SECOND_SIGNAL);
    });
    queen_server::run(config, listener, shutdown).await
}

/// The exit status after a second SIGTERM / SIGINT: 128 + SIGINT, as a shell
/// reports an interrupted command.
const EXIT_SECOND_SIGNAL: i32 = 130;

/// SIGTERM and SIGINT, listened to from start to exit (so none is missed
/// between the first and the second).
struct StopSignals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn new() -> anyhow::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Self {
                term: signal(SignalKind::terminate())?,
                int: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// Waits for the next SIGTERM or SIGINT.
    async fn next(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
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

async fn import(config: Config, args: ImportArgs) -> anyhow::Result<()> {
    use std::io::IsTerminal as _;
    let opts = queen_server::import::ImportOptions {
        from: args.from,
        schema: args.schema,
        dry_run: args.dry_run,
        quiet: args.json || !std::io::stderr().is_terminal(),
        jobs: args.jobs,
        overlap: std::time::Duration::from_secs(args.overlap_secs),
        page: args.page,
    };
    let report = queen_server::import::run(&config, &opts).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    if report.totals.mismatches > 0 {
        anyhow::bail!(
            "{} partitions here differ from the source (marked MISMATCH in the report)",
            report.totals.mismatches
        );
    }
    Ok(())
}
