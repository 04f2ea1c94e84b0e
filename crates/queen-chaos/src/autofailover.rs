//! `--pg-auto-failover`: the brokers on a pg_auto_failover formation built
//! from the machine's packages (Debian's `postgresql-<v>-auto-failover` and
//! `pg-auto-failover-cli`): a monitor, a primary and a secondary, each a
//! `pg_autoctl` process in a process group of its own, run as user
//! `postgres`. Its data, configuration (`XDG_*`), pid files and Unix sockets
//! (`PG_REGRESS_SOCK_DIR`) live in the run's work directory, its servers
//! listen on free loopback ports only; the shared server is never touched.
//!
//! The brokers get the URI that `pg_autoctl show uri --formation default`
//! prints, with the user added (it names none). Schedules switch over
//! (`pg_autoctl perform switchover`), kill the primary node (`kill -9` of its
//! process group: `pg_autoctl`, postmaster, backends) and start it again.
//!
//! A poller records, every 100 ms, the monitor's view of the nodes and which
//! server takes writes with its `synchronous_standby_names`; from that and
//! the journal the report says when each failover put writes on the other
//! node, when synchronous replication came back, and how many pushes were
//! acknowledged while it was off.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::check::Report;
use crate::journal::Journal;
use crate::pgserver::{DbTarget, Failover, Loss};
use crate::schedule::Action;

mod shell;
mod timeline;

use shell::{kill_group, tail, with_user};
use timeline::{monitor_client, node_states, poll, Observation};

/// The monitor's failure detection, shortened so a killed node is failed
/// over in seconds rather than the default 50 s (20 s unhealthy + 30 s
/// demote timeout). `(setting, value, pg_auto_failover's default)`, set with
/// `ALTER SYSTEM` on the monitor and reloaded.
pub const MONITOR_SETTINGS: [(&str, &str, &str); 6] = [
    ("pgautofailover.health_check_period", "1000", "5000"),
    ("pgautofailover.health_check_timeout", "1000", "5000"),
    ("pgautofailover.health_check_max_retries", "1", "2"),
    ("pgautofailover.health_check_retry_delay", "500", "2000"),
    (
        "pgautofailover.node_considered_unhealthy_timeout",
        "3000",
        "20000",
    ),
    ("pgautofailover.primary_demote_timeout", "3000", "30000"),
];

/// The data nodes, in the order they join (the first becomes the primary).
const NODES: [&str; 2] = ["node_a", "node_b"];

/// How long the formation may take to form, and a one-shot command to run.
const SETUP_LIMIT: Duration = Duration::from_secs(90);
const COMMAND_LIMIT: Duration = Duration::from_secs(60);
/// Times `pg_autoctl perform switchover` is asked before the step fails.
const SWITCHOVER_ATTEMPTS: u32 = 3;

/// One `pg_autoctl` process (the monitor or a data node).
#[derive(Debug)]
struct Proc {
    name: &'static str,
    pgdata: PathBuf,
    port: u16,
    child: Option<Child>,
    log: PathBuf,
}

/// A running formation; every process group is killed when dropped.
#[derive(Debug)]
pub struct Formation {
    dir: PathBuf,
    owner: Option<(u32, u32)>,
    bin: PathBuf,
    monitor: Proc,
    nodes: Vec<Proc>,
    db_name: String,
    /// The URI as `pg_autoctl show uri --formation default` printed it.
    pub printed_uri: String,
    /// The same with user `postgres`: the brokers' `DATABASE_URL`.
    pub uri: String,
    t0: Instant,
    /// Each failover and the node that was primary before it.
    failovers: Vec<(Failover, String)>,
    timeline: Arc<Mutex<Vec<Observation>>>,
    poller: Option<JoinHandle<()>>,
}

impl Formation {
    /// Builds the formation in `<work_dir>/pg_auto_failover`: the monitor
    /// (with [`MONITOR_SETTINGS`]), then `node_a` (the primary, with database
    /// `db_name`), then `node_b` (its secondary); returns once the monitor
    /// reports them `primary` and `secondary`.
    pub async fn start(work_dir: &Path, db_name: &str, t0: Instant) -> Result<Self> {
        let bin = queen_testkit::pg_bin_dir().context("no PostgreSQL binaries")?;
        let owner = queen_testkit::pg_os_user()?;
        let dir = work_dir.join("pg_auto_failover");
        for sub in ["", "config", "share", "run"] {
            let d = dir.join(sub);
            std::fs::create_dir_all(&d).with_context(|| format!("create {}", d.display()))?;
            std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
            if let Some((uid, gid)) = owner {
                std::os::unix::fs::chown(&d, Some(uid), Some(gid))?;
            }
        }
        let proc = |name: &'static str| -> Result<Proc> {
            Ok(Proc {
                name,
                pgdata: dir.join(name),
                port: queen_testkit::free_port()?,
                child: None,
                log: dir.join(format!("{name}.log")),
            })
        };
        let mut f = Self {
            monitor: proc("monitor")?,
            nodes: NODES.iter().map(|n| proc(n)).collect::<Result<_>>()?,
            dir,
            owner,
            bin,
            db_name: db_name.to_owned(),
            printed_uri: String::new(),
            uri: String::new(),
            t0,
            failovers: Vec::new(),
            timeline: Arc::default(),
            poller: None,
        };
        tokio::time::timeout(SETUP_LIMIT, f.form())
            .await
            .map_err(|_| anyhow::anyhow!("the formation did not form within {SETUP_LIMIT:?}"))
            .and_then(|r| r)
            .with_context(|| format!("pg_auto_failover logs in {}", f.dir.display()))?;
        Ok(f)
    }

    async fn form(&mut self) -> Result<()> {
        let pgctl = self.bin.join("pg_ctl").display().to_string();
        let mut monitor_args = create_args("monitor", &self.monitor, &pgctl);
        monitor_args.extend(["--auth", "trust", "--no-ssl", "--run"].map(str::to_owned));
        let child = self.spawn(&monitor_args, &self.monitor.log)?;
        self.monitor.child = Some(child);
        let monitor = loop {
            if let Ok(c) = self.monitor_client().await {
                if c.simple_query("SELECT 1 FROM pgautofailover.node LIMIT 1")
                    .await
                    .is_ok()
                {
                    break c;
                }
            }
            self.check_alive()?;
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        for (setting, value, _) in MONITOR_SETTINGS {
            monitor
                .batch_execute(&format!("ALTER SYSTEM SET {setting} = {value}"))
                .await
                .with_context(|| format!("set {setting} on the monitor"))?;
        }
        monitor.batch_execute("SELECT pg_reload_conf()").await?;
        let monitor_uri = format!(
            "postgres://autoctl_node@127.0.0.1:{}/pg_auto_failover?sslmode=prefer",
            self.monitor.port
        );
        for i in 0..self.nodes.len() {
            let node = &self.nodes[i];
            let mut args = create_args("postgres", node, &pgctl);
            args.extend([
                "--name".to_owned(),
                node.name.to_owned(),
                "--dbname".to_owned(),
                self.db_name.clone(),
                "--monitor".to_owned(),
                monitor_uri.clone(),
                "--auth".to_owned(),
                "trust".to_owned(),
                "--no-ssl".to_owned(),
                "--run".to_owned(),
            ]);
            let child = self.spawn(&args, &node.log)?;
            self.nodes[i].child = Some(child);
            // one node at a time: the first is `single` (then primary) before the next joins
            let want: Vec<&str> = if i == 0 {
                vec!["single"]
            } else {
                vec!["primary", "secondary"]
            };
            loop {
                let states = node_states(&monitor).await.unwrap_or_default();
                let reported: Vec<&str> = states.iter().map(|s| s.1.as_str()).collect();
                let goals: Vec<&str> = states.iter().map(|s| s.2.as_str()).collect();
                if reported == want && goals == want {
                    break;
                }
                self.check_alive()?;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            if i == 0 {
                self.unthrottle_checkpoints().await?;
            }
        }
        let out = self
            .run(&[
                "show",
                "uri",
                "--pgdata",
                &self.monitor.pgdata.display().to_string(),
                "--formation",
                "default",
            ])
            .await?;
        self.printed_uri = out.trim().to_owned();
        self.uri = with_user(&self.printed_uri, "postgres")?;
        self.poller = Some(tokio::spawn(poll(
            self.dir.clone(),
            self.monitor.port,
            self.uri.clone(),
            self.t0,
            self.timeline.clone(),
        )));
        Ok(())
    }

    /// `checkpoint_completion_target = 0` on the first node (the standbys
    /// copy it): `pg_autoctl` clones a joining node with `pg_basebackup`
    /// without `--checkpoint=fast`, which waits for a spread checkpoint,
    /// up to 0.9 x `checkpoint_timeout` (4.5 min) with the defaults.
    async fn unthrottle_checkpoints(&self) -> Result<()> {
        let mut config = tokio_postgres::Config::new();
        config
            .host_path(&self.dir)
            .port(self.nodes[0].port)
            .user("postgres")
            .dbname("postgres")
            .connect_timeout(Duration::from_secs(5));
        let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        for sql in [
            "ALTER SYSTEM SET checkpoint_completion_target = 0",
            "SELECT pg_reload_conf()",
        ] {
            client
                .batch_execute(sql)
                .await
                .context("set checkpoint_completion_target on the first node")?;
        }
        Ok(())
    }

    /// The formation's database for the checker's own connections: the URI
    /// with its user, so they land on whichever node takes writes.
    pub fn target(&self) -> DbTarget {
        DbTarget {
            host: "127.0.0.1".into(),
            port: self.nodes[0].port,
            user: "postgres".into(),
            name: self.db_name.clone(),
            url: Some(self.uri.clone()),
        }
    }

    pub fn describe(&self) -> String {
        let settings: Vec<String> = MONITOR_SETTINGS
            .iter()
            .map(|(s, v, _)| format!("{}={v}", s.trim_start_matches("pgautofailover.")))
            .collect();
        format!(
            "pg_auto_failover monitor on port {}, {} on {} and {} on {}; monitor settings {}; \
             `pg_autoctl show uri --formation default` printed {}; the brokers get {}",
            self.monitor.port,
            self.nodes[0].name,
            self.nodes[0].port,
            self.nodes[1].name,
            self.nodes[1].port,
            settings.join(", "),
            self.printed_uri,
            self.uri
        )
    }

    /// Applies one step of the schedule to the formation.
    pub async fn apply(&mut self, action: Action) {
        let r = match action {
            Action::Switchover => self.switchover().await,
            Action::KillPrimaryNode => self.kill_primary_node().await,
            Action::RestartNode => self.restart_nodes(),
            other => Err(anyhow::anyhow!("{other} is not a pg_auto_failover step")),
        };
        if let Err(e) = r {
            println!("  {action} failed: {e:#}");
        }
    }

    async fn switchover(&mut self) -> Result<()> {
        let old = self.primary_name().await?;
        let started = Instant::now();
        self.failovers.push((
            Failover {
                loss: Loss::Switchover,
                lost_at: self.t0.elapsed(),
                promoted_at: None,
                standby_at: None,
            },
            old.clone(),
        ));
        let pgdata = self.monitor.pgdata.display().to_string();
        let args = [
            "perform",
            "switchover",
            "--pgdata",
            &pgdata,
            "--formation",
            "default",
        ];
        // the monitor sometimes answers a deadlock between the request and a
        // node's state report (pg_auto_failover 2.0); asking again works
        let mut attempt = 1;
        while let Err(e) = self.run(&args).await {
            if attempt == SWITCHOVER_ATTEMPTS || self.primary_name().await? != old {
                return Err(e);
            }
            println!("  switchover attempt {attempt} failed, asking again: {e:#}");
            attempt += 1;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        println!(
            "  `pg_autoctl perform switchover` away from {old} returned after {:.2}s",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    async fn kill_primary_node(&mut self) -> Result<()> {
        let old = self.primary_name().await?;
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.name == old)
            .with_context(|| format!("no node named {old}"))?;
        let child = node
            .child
            .take()
            .context("the primary node is not running")?;
        let pgid = child.id().context("the primary node's process is gone")?;
        kill_group(pgid, "KILL");
        self.failovers.push((
            Failover {
                loss: Loss::NodeKilled,
                lost_at: self.t0.elapsed(),
                promoted_at: None,
                standby_at: None,
            },
            old.clone(),
        ));
        let mut child = child;
        let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
        println!("  {old} killed (pg_autoctl, postmaster and backends)");
        Ok(())
    }

    fn restart_nodes(&mut self) -> Result<()> {
        for i in 0..self.nodes.len() {
            if self.nodes[i].child.is_some() {
                continue;
            }
            let args = vec![
                "run".to_owned(),
                "--pgdata".to_owned(),
                self.nodes[i].pgdata.display().to_string(),
            ];
            let child = self.spawn(&args, &self.nodes[i].log)?;
            self.nodes[i].child = Some(child);
            println!("  {} started again", self.nodes[i].name);
        }
        Ok(())
    }

    /// The node the monitor reports as taking writes.
    async fn primary_name(&self) -> Result<String> {
        let monitor = self.monitor_client().await?;
        let states = node_states(&monitor).await?;
        states
            .into_iter()
            .find(|(_, reported, _)| {
                matches!(reported.as_str(), "primary" | "wait_primary" | "single")
            })
            .map(|(name, _, _)| name)
            .context("the monitor reports no primary")
    }

    /// The failovers measured from the poller's timeline and the journal
    /// (see [`timeline::report`]).
    pub fn finish(&mut self, journal: &Journal, groups: usize, report: &mut Report) {
        if let Some(p) = self.poller.take() {
            p.abort();
        }
        let timeline = self
            .timeline
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let ports: Vec<(&str, u16)> = self.nodes.iter().map(|n| (n.name, n.port)).collect();
        report.lines.push(format!(
            "pg_auto_failover: monitor settings {}",
            MONITOR_SETTINGS
                .iter()
                .map(|(s, v, d)| format!("{s}={v} (default {d})"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        timeline::report(&self.failovers, &ports, &timeline, journal, groups, report);
    }

    /// Stops every node (SIGTERM to `pg_autoctl`, which stops its
    /// PostgreSQL), then kills what is left.
    pub async fn shutdown(&mut self) {
        if let Some(p) = self.poller.take() {
            p.abort();
        }
        for p in self
            .nodes
            .iter_mut()
            .chain(std::iter::once(&mut self.monitor))
        {
            if let Some(mut child) = p.child.take() {
                if let Some(pid) = child.id() {
                    let _ = std::process::Command::new("kill")
                        .args(["-TERM", &pid.to_string()])
                        .status();
                    if tokio::time::timeout(Duration::from_secs(15), child.wait())
                        .await
                        .is_err()
                    {
                        println!("queen-chaos: {} did not stop in 15 s; killed", p.name);
                    }
                    kill_group(pid, "KILL");
                }
            }
        }
    }

    /// The logs of the formation's processes, kept in the work directory.
    pub fn log_dir(&self) -> &Path {
        &self.dir
    }

    fn check_alive(&mut self) -> Result<()> {
        for p in self
            .nodes
            .iter_mut()
            .chain(std::iter::once(&mut self.monitor))
        {
            if let Some(child) = p.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    p.child = None;
                    bail!(
                        "{} exited with {status}: {}",
                        p.name,
                        tail(&std::fs::read_to_string(&p.log).unwrap_or_default())
                    );
                }
            }
        }
        Ok(())
    }

    async fn monitor_client(&self) -> Result<tokio_postgres::Client> {
        monitor_client(&self.dir, self.monitor.port).await
    }

    /// A `pg_autoctl` command with the formation's private environment,
    /// as user `postgres` when we are root.
    fn command(&self, args: &[impl AsRef<std::ffi::OsStr>]) -> Command {
        let mut cmd = Command::new("pg_autoctl");
        let path = format!("{}:/usr/bin:/bin", self.bin.display());
        cmd.args(args)
            .env_clear()
            .env("PATH", path)
            .env("HOME", &self.dir)
            .env("XDG_CONFIG_HOME", self.dir.join("config"))
            .env("XDG_DATA_HOME", self.dir.join("share"))
            .env("XDG_RUNTIME_DIR", self.dir.join("run"))
            // Unix sockets in the work directory, not /var/run/postgresql
            .env("PG_REGRESS_SOCK_DIR", &self.dir)
            .env("PGHOST", &self.dir)
            .env("PG_CONFIG", self.bin.join("pg_config"))
            .current_dir(&self.dir)
            .stdin(Stdio::null());
        if let Some((uid, gid)) = self.owner {
            cmd.uid(uid).gid(gid);
        }
        cmd
    }

    /// Starts a long-running `pg_autoctl` in a process group of its own
    /// (so a kill takes its PostgreSQL too), its output appended to `log`.
    fn spawn(&self, args: &[String], log: &Path) -> Result<Child> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("open {}", log.display()))?;
        let mut cmd = self.command(args);
        cmd.process_group(0)
            .stdout(Stdio::from(file.try_clone()?))
            .stderr(Stdio::from(file));
        cmd.spawn()
            .with_context(|| format!("spawn pg_autoctl {}", args.join(" ")))
    }

    /// Runs a one-shot `pg_autoctl` command in a process group of its own
    /// (killed afterwards, with anything it left behind); answers its
    /// standard output.
    async fn run(&self, args: &[&str]) -> Result<String> {
        let mut cmd = self.command(args);
        cmd.kill_on_drop(true)
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = cmd.spawn().with_context(|| {
            "run pg_autoctl (install postgresql-<v>-auto-failover and pg-auto-failover-cli)"
        })?;
        let group = child.id();
        let out = tokio::time::timeout(COMMAND_LIMIT, child.wait_with_output()).await;
        if let Some(pgid) = group {
            kill_group(pgid, "KILL");
        }
        let out = out
            .with_context(|| format!("pg_autoctl {} took over {COMMAND_LIMIT:?}", args.join(" ")))?
            .with_context(|| format!("wait for pg_autoctl {}", args.join(" ")))?;
        if !out.status.success() {
            bail!(
                "pg_autoctl {} failed ({}): {}",
                args.join(" "),
                out.status,
                tail(&String::from_utf8_lossy(&out.stderr))
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// `pg_autoctl create <kind>` for `p`: its data directory, port and pg_ctl,
/// on loopback; the caller adds what the kind needs.
fn create_args(kind: &str, p: &Proc, pgctl: &str) -> Vec<String> {
    vec![
        "create".to_owned(),
        kind.to_owned(),
        "--pgdata".to_owned(),
        p.pgdata.display().to_string(),
        "--pgport".to_owned(),
        p.port.to_string(),
        "--pgctl".to_owned(),
        pgctl.to_owned(),
        "--hostname".to_owned(),
        "127.0.0.1".to_owned(),
        "--listen".to_owned(),
        "127.0.0.1".to_owned(),
    ]
}

impl Drop for Formation {
    fn drop(&mut self) {
        for p in self.nodes.iter().chain(std::iter::once(&self.monitor)) {
            if let Some(pid) = p.child.as_ref().and_then(Child::id) {
                kill_group(pid, "KILL");
            }
        }
    }
}
