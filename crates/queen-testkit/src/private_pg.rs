//! `PrivatePg`: a PostgreSQL server of its own, from the machine's binaries,
//! in a temporary directory on a free port, to kill, freeze and promote
//! without touching the shared server. A primary and a synchronous streaming
//! standby: [`PrivatePg::primary`], then [`PrivatePg::sync_standby`].
//!
//! The binaries come from `QUEEN_PG_BIN`, else the newest
//! `/usr/lib/postgresql/<v>/bin`, else `pg_config --bindir`. PostgreSQL
//! refuses to run as root: run as root, the server runs as user `postgres`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context as _};

use crate::free_port;

/// The directory holding `initdb`, `pg_ctl`, `pg_basebackup` and `postgres`.
pub fn pg_bin_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("QUEEN_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
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
    let out = Command::new("pg_config").arg("--bindir").output().ok()?;
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    dir.join("initdb").exists().then_some(dir)
}

/// The uid and gid PostgreSQL's programs must run as: those of user
/// `postgres` when we run as root (PostgreSQL refuses root), `None` (as we
/// are) otherwise.
pub fn pg_os_user() -> anyhow::Result<Option<(u32, u32)>> {
    run_as()
}

/// The uid and gid of user `postgres` when we run as root (PostgreSQL refuses root).
fn run_as() -> anyhow::Result<Option<(u32, u32)>> {
    let uid = Command::new("id").arg("-u").output()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Ok(None);
    }
    let id = |flag: &str| -> anyhow::Result<u32> {
        let out = Command::new("id").args([flag, "postgres"]).output()?;
        if !out.status.success() {
            bail!("running as root and no user `postgres` to run PostgreSQL as");
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
    };
    Ok(Some((id("-u")?, id("-g")?)))
}

/// A private PostgreSQL server; stopped (killed) and removed when dropped.
#[derive(Debug)]
pub struct PrivatePg {
    pub port: u16,
    data: PathBuf,
    bin: PathBuf,
    owner: Option<(u32, u32)>,
    /// The password of user `postgres` over TCP, when not trusted.
    password: Option<String>,
    dir: tempfile::TempDir,
}

impl PrivatePg {
    /// Initializes and starts a primary that takes streaming standbys
    /// (every connection trusted).
    pub async fn primary() -> anyhow::Result<Self> {
        Self::init(None).await
    }

    /// A primary whose TCP connections authenticate with a password
    /// (`scram-sha-256`); user `postgres` has `password`. The admin
    /// connections of this handle use it.
    pub async fn primary_with_password(password: &str) -> anyhow::Result<Self> {
        Self::init(Some(password)).await
    }

    async fn init(password: Option<&str>) -> anyhow::Result<Self> {
        let bin = pg_bin_dir().context("no PostgreSQL binaries (set QUEEN_PG_BIN)")?;
        let mut pg = Self::prepare(bin)?;
        let mut args = vec![
            "-D".to_owned(),
            pg.data_str().to_owned(),
            "-U".to_owned(),
            "postgres".to_owned(),
            "--no-sync".to_owned(),
            "-E".to_owned(),
            "UTF8".to_owned(),
        ];
        match password {
            None => args.push("--auth=trust".to_owned()),
            Some(pw) => {
                let file = pg.dir.path().join("pwfile");
                std::fs::write(&file, pw)?;
                if let Some((uid, gid)) = pg.owner {
                    std::os::unix::fs::chown(&file, Some(uid), Some(gid))?;
                }
                args.push("--auth-local=trust".to_owned());
                args.push("--auth-host=scram-sha-256".to_owned());
                args.push(format!("--pwfile={}", file.display()));
                pg.password = Some(pw.to_owned());
            }
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        pg.run("initdb", &args).await?;
        pg.append_conf(
            "wal_level = replica\nmax_wal_senders = 5\nhot_standby = on\n\
             shared_buffers = 16MB\nmax_connections = 60\nfsync = off\n\
             full_page_writes = off\nwal_keep_size = 64MB\n",
        )?;
        pg.start().await?;
        Ok(pg)
    }

    /// Clones this primary with `pg_basebackup -R`, starts the copy as a
    /// streaming standby, and makes it synchronous: a commit on the primary
    /// returns once the standby has it. Waits until it streams in sync.
    pub async fn sync_standby(&self) -> anyhow::Result<Self> {
        let standby = Self::prepare(self.bin.clone())?;
        std::fs::remove_dir_all(&standby.data).ok();
        let port = self.port.to_string();
        standby
            .run(
                "pg_basebackup",
                &[
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &port,
                    "-U",
                    "postgres",
                    "-D",
                    standby.data_str(),
                    "-R",
                    "-X",
                    "stream",
                    "-c",
                    "fast",
                    "--no-sync",
                ],
            )
            .await?;
        standby.start().await?;
        // set after the copy, so the standby (a primary once promoted) does
        // not wait for a standby of its own
        let admin = self.admin().await?;
        admin
            .batch_execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
            .await?;
        admin.batch_execute("SELECT pg_reload_conf()").await?;
        for _ in 0..300 {
            let rows = admin
                .query(
                    "SELECT 1 FROM pg_stat_replication WHERE sync_state = 'sync' AND state = 'streaming'",
                    &[],
                )
                .await?;
            if !rows.is_empty() {
                return Ok(standby);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("the standby never streamed in sync")
    }

    /// `pg_ctl promote`: the standby becomes a primary; waits until it takes writes.
    pub async fn promote(&self) -> anyhow::Result<()> {
        self.run(
            "pg_ctl",
            &["-D", self.data_str(), "-w", "-t", "60", "promote"],
        )
        .await?;
        let admin = self.admin().await?;
        for _ in 0..300 {
            let row = admin.query_one("SELECT pg_is_in_recovery()", &[]).await?;
            if !row.get::<_, bool>(0) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("the standby did not leave recovery")
    }

    /// `kill -9` of the postmaster and every backend: a dead host.
    pub fn kill(&self) -> anyhow::Result<()> {
        self.signal("KILL")
    }

    /// `SIGSTOP` of the postmaster and every backend: a hung host whose
    /// connections stay open and never answer.
    pub fn freeze(&self) -> anyhow::Result<()> {
        self.signal("STOP")
    }

    /// `SIGCONT` after [`freeze`](Self::freeze).
    pub fn thaw(&self) -> anyhow::Result<()> {
        self.signal("CONT")
    }

    /// A crash and a restart: an immediate shutdown (no checkpoint, every
    /// session cut), then crash recovery at start, on the same port. Returns
    /// once the server accepts connections again.
    pub async fn restart(&self) -> anyhow::Result<()> {
        self.pg_ctl(&["-m", "immediate", "restart"]).await
    }

    /// Creates database `name` (owned by `postgres`).
    pub async fn create_db(&self, name: &str) -> anyhow::Result<()> {
        self.admin()
            .await?
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .await
            .with_context(|| format!("create database {name}"))?;
        Ok(())
    }

    /// A connection to database `postgres` as user `postgres`.
    pub async fn admin(&self) -> anyhow::Result<tokio_postgres::Client> {
        let mut config = tokio_postgres::Config::new();
        config
            .host("127.0.0.1")
            .port(self.port)
            .user("postgres")
            .dbname("postgres")
            .connect_timeout(Duration::from_secs(10));
        if let Some(pw) = &self.password {
            config.password(pw);
        }
        let (client, connection) = config
            .connect(tokio_postgres::NoTls)
            .await
            .with_context(|| format!("connect to the private PostgreSQL on {}", self.port))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }

    /// The server's log so far (for a failing test's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    fn prepare(bin: PathBuf) -> anyhow::Result<Self> {
        let owner = run_as()?;
        let dir = tempfile::Builder::new().prefix("queen-pg-").tempdir()?;
        let data = dir.path().join("data");
        std::fs::create_dir(&data)?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))?;
            std::os::unix::fs::chown(&data, Some(uid), Some(gid))?;
        }
        std::fs::set_permissions(&data, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
        Ok(Self {
            port: free_port()?,
            data,
            bin,
            owner,
            password: None,
            dir,
        })
    }

    fn data_str(&self) -> &str {
        self.data.to_str().unwrap_or_default()
    }

    fn append_conf(&self, text: &str) -> anyhow::Result<()> {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(self.data.join("postgresql.conf"))?;
        f.write_all(text.as_bytes())?;
        Ok(())
    }

    async fn start(&self) -> anyhow::Result<()> {
        let opts = format!(
            "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories={}",
            self.port,
            self.dir.path().display()
        );
        self.pg_ctl(&["-o", &opts, "start"]).await
    }

    /// `pg_ctl` on this server with its log file, waiting up to 60 s.
    async fn pg_ctl(&self, args: &[&str]) -> anyhow::Result<()> {
        let log = self.dir.path().join("server.log");
        let mut all = vec![
            "-D",
            self.data_str(),
            "-l",
            log.to_str().unwrap_or_default(),
            "-w",
            "-t",
            "60",
        ];
        all.extend_from_slice(args);
        self.run("pg_ctl", &all)
            .await
            .with_context(|| format!("log: {}", self.log()))
    }

    /// Runs one of the binaries (as `postgres` when we are root), without
    /// holding up the runtime's threads while it works.
    async fn run(&self, program: &str, args: &[&str]) -> anyhow::Result<()> {
        let mut cmd = tokio::process::Command::new(self.bin.join(program));
        cmd.args(args)
            .current_dir(self.dir.path())
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        if let Some((uid, gid)) = self.owner {
            cmd.uid(uid).gid(gid).env("HOME", self.dir.path());
        }
        let out = cmd
            .output()
            .await
            .with_context(|| format!("run {}", self.bin.join(program).display()))?;
        if !out.status.success() {
            bail!(
                "{program} {args:?} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    /// The postmaster's pid, from `postmaster.pid`.
    fn postmaster(&self) -> Option<u32> {
        std::fs::read_to_string(self.data.join("postmaster.pid"))
            .ok()?
            .lines()
            .next()?
            .trim()
            .parse()
            .ok()
    }

    /// Sends `sig` to the postmaster and its children.
    fn signal(&self, sig: &str) -> anyhow::Result<()> {
        let pm = self.postmaster().context("no postmaster.pid")?;
        let mut pids = vec![pm];
        pids.extend(children_of(pm));
        // only PostgreSQL's own processes: a stale pid may name another one now
        pids.retain(|p| is_postgres(*p));
        if pids.is_empty() {
            return Ok(());
        }
        let mut cmd = Command::new("kill");
        cmd.arg(format!("-{sig}"));
        for p in &pids {
            cmd.arg(p.to_string());
        }
        let status = cmd.stderr(std::process::Stdio::null()).status()?;
        // a backend may have exited between the listing and the signal
        if !status.success() && is_postgres(pm) {
            bail!("kill -{sig} {pids:?} failed");
        }
        Ok(())
    }
}

/// True when process `pid` runs the `postgres` binary.
fn is_postgres(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "postgres")
}

/// The pids whose parent is `parent`, from `/proc`.
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // pid (comm) state ppid ...: comm may hold spaces, so after the last ')'
            let rest = &stat[stat.rfind(')')? + 1..];
            let ppid: u32 = rest.split_whitespace().nth(1)?.parse().ok()?;
            (ppid == parent).then_some(pid)
        })
        .collect()
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        // a frozen server ignores pg_ctl stop: SIGKILL works on stopped processes
        if self.postmaster().is_some() && Path::new(&self.data).exists() {
            let _ = self.signal("KILL");
        }
    }
}
