//! A private PostgreSQL server for `--private-pg`, so the schedule can restart
//! PostgreSQL itself (`restart-pg`: an immediate shutdown, i.e. a crash, then
//! crash recovery). It lives in the work directory on a free loopback port,
//! runs as user `postgres` when the harness runs as root, and is stopped and
//! deleted on drop.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use tokio::process::Command;

/// Where Debian and Ubuntu put the server binaries, newest version first.
const PG_LIB: &str = "/usr/lib/postgresql";

#[derive(Debug)]
pub struct PrivatePg {
    bin: PathBuf,
    pub data: PathBuf,
    pub port: u16,
    /// `runuser -u postgres --` when running as root (PostgreSQL refuses root).
    as_postgres: bool,
}

/// A database to point the brokers and the checker at.
#[derive(Debug, Clone)]
pub struct DbTarget {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub name: String,
}

impl DbTarget {
    pub async fn client(&self) -> Result<tokio_postgres::Client> {
        let conn = format!(
            "host={} port={} user={} dbname={}",
            self.host, self.port, self.user, self.name
        );
        let (client, connection) = tokio_postgres::connect(&conn, tokio_postgres::NoTls)
            .await
            .with_context(|| format!("connect to {conn}"))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }
}

fn find_bin() -> Result<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(PG_LIB)
        .with_context(|| format!("look for PostgreSQL server binaries in {PG_LIB}"))?
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, b)| b)
        .with_context(|| format!("no initdb under {PG_LIB}/*/bin"))
}

fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

impl PrivatePg {
    fn command(&self, tool: &str) -> Command {
        let exe = self.bin.join(tool);
        let mut c = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        c.stdin(Stdio::null()).kill_on_drop(true);
        c
    }

    /// Runs a tool with its output in `tools.log` in the data directory's
    /// parent (a postmaster started by `pg_ctl` would otherwise hold a pipe).
    async fn run(&self, tool: &str, args: &[&str], limit: Duration) -> Result<()> {
        let log_path = self
            .data
            .parent()
            .unwrap_or(Path::new("."))
            .join("pg-tools.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)?;
        let status = tokio::time::timeout(
            limit,
            self.command(tool)
                .args(args)
                .stdout(Stdio::from(log.try_clone()?))
                .stderr(Stdio::from(log))
                .status(),
        )
        .await
        .with_context(|| format!("{tool} did not finish within {limit:?}"))?
        .with_context(|| format!("run {tool}"))?;
        if !status.success() {
            bail!("{tool} failed ({status}); see {}", log_path.display());
        }
        Ok(())
    }

    fn server_log(&self) -> String {
        self.data
            .parent()
            .unwrap_or(Path::new("."))
            .join("pg-server.log")
            .display()
            .to_string()
    }

    /// Creates and starts a new cluster in `work_dir/pgdata` on a free port.
    pub async fn start(work_dir: &Path) -> Result<Self> {
        let bin = find_bin()?;
        let data = work_dir.join("pgdata");
        std::fs::create_dir_all(&data)?;
        // the server writes its log as the user it runs as
        let server_log = work_dir.join("pg-server.log");
        std::fs::write(&server_log, b"")?;
        let as_postgres = is_root();
        if as_postgres {
            let ok = std::process::Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&data)
                .arg(&server_log)
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if !ok {
                bail!("cannot give {} to user postgres", data.display());
            }
        }
        let port = queen_testkit::free_port()?;
        let pg = Self {
            bin,
            data,
            port,
            as_postgres,
        };
        let d = pg.data.display().to_string();
        pg.run(
            "initdb",
            &[
                "-D",
                &d,
                "-U",
                "postgres",
                "-A",
                "trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
            Duration::from_secs(120),
        )
        .await?;
        let opts = format!(
            "-p {port} -c listen_addresses=127.0.0.1 -k {d} -c max_connections=60 -c shared_buffers=32MB"
        );
        let log = pg.server_log();
        pg.run(
            "pg_ctl",
            &["-D", &d, "-l", &log, "-o", &opts, "-w", "-t", "60", "start"],
            Duration::from_secs(90),
        )
        .await?;
        Ok(pg)
    }

    /// Creates database `name` and returns how to reach it.
    pub async fn create_db(&self, name: &str) -> Result<DbTarget> {
        let admin = DbTarget {
            host: "127.0.0.1".into(),
            port: self.port,
            user: "postgres".into(),
            name: "postgres".into(),
        };
        admin
            .client()
            .await?
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .await
            .context("create the database")?;
        Ok(DbTarget {
            name: name.to_owned(),
            ..admin
        })
    }

    /// Crashes PostgreSQL (immediate shutdown: no checkpoint, every session
    /// cut) and starts it again; returns once it accepts connections.
    pub async fn restart(&self) -> Result<()> {
        let d = self.data.display().to_string();
        let log = self.server_log();
        self.run(
            "pg_ctl",
            &[
                "-D",
                &d,
                "-l",
                &log,
                "-m",
                "immediate",
                "-w",
                "-t",
                "60",
                "restart",
            ],
            Duration::from_secs(90),
        )
        .await
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        let exe = self.bin.join("pg_ctl");
        let mut c = if self.as_postgres {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            std::process::Command::new(exe)
        };
        let _ = c
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "-w", "-t", "30", "stop"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.data);
    }
}
