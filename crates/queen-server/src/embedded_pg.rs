//! `serve --embedded-pg DIR`: a private PostgreSQL from the machine's
//! binaries, for a machine where PostgreSQL is installed but not running, or
//! has no role for the broker.
//!
//! On first use `initdb` makes a cluster in `DIR` (user `postgres`, trust
//! authentication, reachable only through a Unix socket in `DIR`: no TCP
//! port, so nothing else on the machine can reach it and no port can clash).
//! The server starts with the broker and stops with it; the data stays in
//! `DIR` across restarts. The binaries come from `QUEEN_PG_BIN`, else the
//! newest `/usr/lib/postgresql/<version>/bin`, else `pg_config --bindir`,
//! else `initdb` on the `PATH`. PostgreSQL refuses to run as root: run as
//! root, the cluster belongs to user `postgres` and the server runs as it.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _};

use crate::config::DbConfig;

/// The port number in the socket's name (`.s.PGSQL.5432`); no TCP port is opened.
const SOCKET_PORT: u16 = 5432;
/// The longest Unix socket path the kernel takes, minus the file name.
const MAX_SOCKET_DIR: usize = 90;

/// A running private server; stopped by [`EmbeddedPg::stop`] (or when dropped).
#[derive(Debug)]
pub struct EmbeddedPg {
    dir: PathBuf,
    bin: PathBuf,
    owner: Option<(u32, u32)>,
    running: bool,
}

/// The directory holding `initdb` and `pg_ctl`.
pub fn find_binaries() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("QUEEN_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if dir.join("initdb").exists() {
            return Some(dir);
        }
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .find(|p| p.join("initdb").exists() && p.join("pg_ctl").exists())
    })
}

/// The uid and gid of user `postgres` when this process runs as root.
fn run_as() -> anyhow::Result<Option<(u32, u32)>> {
    let me = Command::new("id").arg("-u").output().context("run id -u")?;
    if String::from_utf8_lossy(&me.stdout).trim() != "0" {
        return Ok(None);
    }
    let id = |flag: &str| -> anyhow::Result<u32> {
        let out = Command::new("id").args([flag, "postgres"]).output()?;
        if !out.status.success() {
            bail!("--embedded-pg: PostgreSQL refuses to run as root, and there is no user `postgres` to run it as; run the broker as another user");
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
    };
    Ok(Some((id("-u")?, id("-g")?)))
}

impl EmbeddedPg {
    /// Creates the cluster in `dir` if there is none, and starts it.
    pub fn start(dir: &Path) -> anyhow::Result<Self> {
        let bin = find_binaries().context(
            "--embedded-pg: no PostgreSQL binaries found (looked at QUEEN_PG_BIN, /usr/lib/postgresql/*/bin, pg_config --bindir and the PATH); install PostgreSQL or set QUEEN_PG_BIN",
        )?;
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--embedded-pg: cannot create {}", dir.display()))?;
        let dir = dir
            .canonicalize()
            .with_context(|| format!("--embedded-pg: cannot resolve {}", dir.display()))?;
        if dir.as_os_str().len() > MAX_SOCKET_DIR {
            bail!(
                "--embedded-pg: {} is too long a path for PostgreSQL's Unix socket (at most {MAX_SOCKET_DIR} bytes); choose a shorter directory",
                dir.display()
            );
        }
        let owner = run_as()?;
        let mut pg = Self {
            dir,
            bin,
            owner,
            running: false,
        };
        let data = pg.data();
        if !data.join("PG_VERSION").exists() {
            std::fs::create_dir_all(&data)?;
            pg.own(&pg.dir)?;
            pg.own(&data)?;
            std::fs::set_permissions(&data, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
            tracing::info!(dir = %data.display(), "--embedded-pg: creating a PostgreSQL cluster (first use)");
            pg.run(
                "initdb",
                &[
                    "-D",
                    &data.display().to_string(),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "-E",
                    "UTF8",
                ],
            )?;
        }
        let opts = format!(
            "-c listen_addresses='' -c unix_socket_directories='{}' -p {SOCKET_PORT}",
            pg.dir.display()
        );
        let log = pg.dir.join("postgresql.log");
        if log.exists() {
            pg.own(&log)?;
        }
        pg.run(
            "pg_ctl",
            &[
                "-D",
                &data.display().to_string(),
                "-l",
                &log.display().to_string(),
                "-o",
                &opts,
                "-w",
                "-t",
                "60",
                "start",
            ],
        )
        .with_context(|| {
            format!(
                "--embedded-pg: PostgreSQL did not start; see {}",
                log.display()
            )
        })?;
        pg.running = true;
        tracing::info!(dir = %pg.dir.display(), "--embedded-pg: private PostgreSQL running (Unix socket only)");
        Ok(pg)
    }

    /// Points `db` at this server: its socket, user `postgres`, database `postgres`.
    pub fn configure(&self, db: &mut DbConfig) {
        db.url = None;
        db.host = self.dir.display().to_string();
        db.ports = vec![SOCKET_PORT];
        db.user = "postgres".to_owned();
        db.password = String::new();
        db.dbname = "postgres".to_owned();
        db.use_ssl = false;
    }

    /// Stops the server (fast shutdown: sessions end, data is flushed).
    pub fn stop(&mut self) {
        if !self.running {
            return;
        }
        self.running = false;
        let data = self.data().display().to_string();
        match self.run("pg_ctl", &["-D", &data, "-m", "fast", "-w", "stop"]) {
            Ok(()) => tracing::info!("--embedded-pg: private PostgreSQL stopped"),
            Err(e) => tracing::warn!(error = %e, "--embedded-pg: stopping PostgreSQL failed"),
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn own(&self, path: &Path) -> anyhow::Result<()> {
        if let Some((uid, gid)) = self.owner {
            std::os::unix::fs::chown(path, Some(uid), Some(gid)).with_context(|| {
                format!(
                    "--embedded-pg: cannot hand {} to user postgres",
                    path.display()
                )
            })?;
        }
        Ok(())
    }

    fn run(&self, program: &str, args: &[&str]) -> anyhow::Result<()> {
        let mut cmd = Command::new(self.bin.join(program));
        cmd.args(args).current_dir(&self.dir);
        if let Some((uid, gid)) = self.owner {
            cmd.uid(uid).gid(gid);
        }
        let out = cmd
            .output()
            .with_context(|| format!("run {}", self.bin.join(program).display()))?;
        if !out.status.success() {
            bail!(
                "{program} failed: {}{}",
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }
}

impl Drop for EmbeddedPg {
    fn drop(&mut self) {
        self.stop();
    }
}
