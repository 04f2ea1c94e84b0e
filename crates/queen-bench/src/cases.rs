//! The load scenarios of the suite (push, pop+ack, end-to-end, fan-out),
//! written once for every system: Queen on a fresh database and broker, or a
//! peer broker (RabbitMQ, NATS JetStream) with freshly declared queues.
//!
//! The same engine drives them all with the same producers, consumers,
//! payload sizes and partition counts; only the stage differs: what a
//! scenario prepares unmeasured, whose CPU is measured, and what is removed
//! afterwards.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};

use crate::load::{self, ConsumeSpec, Engine, LoadOutcome, ProduceSpec, RunState};
use crate::meter::{Meter, Resources};
use crate::peers::{self, AnyTarget, Layout, Peer, PeerTarget, Session};
use crate::queen::QueenTarget;
use crate::results::{ScenarioResult, SuiteReport};
use crate::suite::{self, parse_case, Case, Env, Rate, Suite};

/// The system a scenario measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum System {
    Queen,
    Peer(Peer),
}

impl System {
    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "queen" => Self::Queen,
            "rabbitmq" => Self::Peer(Peer::RabbitMq),
            "nats" => Self::Peer(Peer::Nats),
            other => bail!("unknown system {other:?} (queen, rabbitmq, nats)"),
        })
    }

    /// Prefix of the scenario ids (`rabbitmq/`); none for Queen, whose ids
    /// are those of the earlier reports.
    pub fn prefix(self) -> String {
        match self {
            Self::Queen => String::new(),
            Self::Peer(p) => format!("{}/", p.name()),
        }
    }
}

/// Where one scenario runs.
enum Stage {
    Queen(Box<Env>),
    Peer {
        session: Arc<Session>,
        pid: Option<u32>,
        target: Option<PeerTarget>,
    },
}

/// How a Queen queue is readied before the measured interval.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Warm {
    /// Nothing: the partitions are created by the measured load.
    No,
    /// One message per partition creates them.
    Partitions,
    /// The same, and the messages are consumed again.
    PartitionsDrained,
}

impl Stage {
    async fn open(suite: &mut Suite, system: System, kind: &str) -> Result<Self> {
        match system {
            System::Queen => Ok(Self::Queen(Box::new(suite.env(kind).await?))),
            System::Peer(p) => Ok(Self::Peer {
                session: suite.session(p)?,
                pid: p.pid(),
                target: None,
            }),
        }
    }

    fn pid(&self) -> Option<u32> {
        match self {
            Self::Queen(env) => env.pid,
            Self::Peer { pid, .. } => *pid,
        }
    }

    fn idle_rss_mb(&self) -> Option<f64> {
        match self {
            Self::Queen(env) => env.idle_rss_mb,
            Self::Peer { .. } => None,
        }
    }

    /// The database whose statistics and backends are measured (none for a peer).
    fn db(&self) -> &str {
        match self {
            Self::Queen(env) => &env.db,
            Self::Peer { .. } => "",
        }
    }

    /// Creates what the scenario's queue needs, unmeasured.
    async fn prepare(&mut self, layout: Layout, warm: Warm) -> Result<()> {
        match self {
            Self::Queen(env) => {
                if warm != Warm::No {
                    let api = &env.api;
                    let n = suite::warm_partitions(
                        api,
                        &layout.base,
                        layout.partitions,
                        layout.payload_bytes,
                    )
                    .await?;
                    if warm == Warm::PartitionsDrained {
                        suite::drain_all(api, &layout.base, n, Duration::from_secs(120)).await?;
                    }
                }
                Ok(())
            }
            Self::Peer {
                session, target, ..
            } => {
                *target = Some(session.prepare(layout).await?);
                Ok(())
            }
        }
    }

    /// Between preparation and measurement: a Queen broker the suite manages
    /// is restarted, so the measured one starts with clean statistics.
    async fn ready(&mut self, suite: &Suite) -> Result<()> {
        match self {
            Self::Queen(env) => suite.restart(env).await,
            Self::Peer { .. } => Ok(()),
        }
    }

    fn target(&self, run: &Arc<RunState>, payload_bytes: usize) -> Result<AnyTarget<'_>> {
        Ok(match self {
            Self::Queen(env) => AnyTarget::Queen(QueenTarget {
                api: env.api.clone(),
                run: Arc::clone(run),
                payload_bytes,
            }),
            Self::Peer { target, .. } => AnyTarget::Peer(
                target
                    .as_ref()
                    .context("the peer's queues were not prepared")?,
            ),
        })
    }

    /// Runs the load between a meter's start and stop and reads the resources.
    async fn measure(
        &mut self,
        suite: &Suite,
        run: Arc<RunState>,
        label: &str,
        produce: Option<&ProduceSpec>,
        consume: Option<&ConsumeSpec>,
    ) -> Result<Measured> {
        let meter = Meter::start(self.pid(), &suite.monitor, &suite.cfg.pg, self.db()).await?;
        let out = {
            let target = self.target(&run, suite.cfg.payload_bytes)?;
            let engine = Engine {
                target: &target,
                run,
                label: label.to_owned(),
                broker_pid: self.pid(),
                progress: true,
            };
            engine.run(produce, consume).await?
        };
        let stopped = meter.stop();
        let resource_series = stopped.series().to_vec();
        let seconds = if consume.is_some() {
            out.consume_seconds
        } else {
            out.push_seconds
        };
        let (resources, rss_after) = match self {
            Self::Queen(env) => suite.finish(env, stopped, Some(seconds.max(1e-9))).await?,
            Self::Peer { .. } => {
                let res = stopped
                    .finish(&suite.monitor, "", suite.settle(), Some(seconds.max(1e-9)))
                    .await?;
                (res, None)
            }
        };
        Ok(Measured {
            out,
            resources,
            rss_after,
            resource_series,
        })
    }

    /// Unmeasured: the same engine fills the queue.
    async fn fill(
        &self,
        suite: &Suite,
        run: &Arc<RunState>,
        label: &str,
        spec: &ProduceSpec,
    ) -> Result<LoadOutcome> {
        let target = self.target(run, suite.cfg.payload_bytes)?;
        let engine = Engine {
            target: &target,
            run: Arc::clone(run),
            label: label.to_owned(),
            broker_pid: self.pid(),
            progress: true,
        };
        engine.run(Some(spec), None).await
    }

    async fn release(self, suite: &Suite) {
        match self {
            Self::Queen(env) => suite.release(*env).await,
            Self::Peer {
                session, target, ..
            } => {
                if let Some(t) = &target {
                    session.cleanup(t).await;
                }
            }
        }
    }
}

struct Measured {
    out: LoadOutcome,
    resources: Resources,
    rss_after: Option<f64>,
    resource_series: Vec<crate::meter::ResourceSample>,
}

impl Measured {
    /// The common part of every load scenario's result.
    fn result(self, id: &str, kind: &str, stage: &Stage, latency_of: &str) -> ScenarioResult {
        let Measured {
            out,
            resources,
            rss_after,
            resource_series,
        } = self;
        let (messages, seconds, latency) = match kind {
            "push" => (out.pushed, out.push_seconds, out.push_latency),
            "pop-ack" => (out.delivered, out.consume_seconds, out.pop_latency),
            _ => (out.delivered, out.consume_seconds, out.e2e),
        };
        let mut r = ScenarioResult {
            id: id.to_owned(),
            kind: kind.into(),
            messages,
            seconds,
            msg_per_s: messages as f64 / seconds.max(1e-9),
            latency_of: latency_of.into(),
            latency,
            resources: Some(resources),
            broker_idle_rss_mb: stage.idle_rss_mb(),
            broker_rss_after_mb: rss_after,
            series: if kind == "push" {
                Vec::new()
            } else {
                out.series.clone()
            },
            resource_series: if kind == "push" || kind == "pop-ack" {
                Vec::new()
            } else {
                resource_series
            },
            ..ScenarioResult::default()
        };
        if kind == "push" {
            r.detail("pushRequests", out.push_requests);
        } else {
            r.latencies.insert("ack request".into(), out.ack_latency);
            if kind != "pop-ack" {
                r.latencies.insert("push request".into(), out.push_latency);
                r.latencies.insert("pop request".into(), out.pop_latency);
                r.detail("pushed", out.pushed);
                r.detail(
                    "pushMsgPerS",
                    out.pushed as f64 / out.push_seconds.max(1e-9),
                );
                r.detail("earlyDeliveries", out.early);
            }
            consumer_details(&mut r, &out);
        }
        r
    }
}

fn consumer_details(r: &mut ScenarioResult, out: &LoadOutcome) {
    r.detail("complete", out.complete);
    r.detail("popRequests", out.pop_requests);
    r.detail("emptyPops", out.empty_pops);
    r.detail("redelivered", out.redelivered);
    r.detail("foreign", out.foreign);
    r.detail("acked", out.acked);
    r.detail("ackFailures", out.ack_failures);
    if let Some(e) = &out.first_ack_error {
        r.detail("firstAckError", e.clone());
    }
    r.detail("receivedPerGroup", out.received.clone());
    if !out.complete {
        r.detail(
            "note",
            format!(
                "incomplete: groups received {:?} of {} pushed",
                out.received, out.pushed
            ),
        );
    }
}

/// How a queue of `case` is readied: fresh partitions are made by the load.
fn warm_for(case: &Case, warm: Warm) -> Warm {
    if case.fresh {
        Warm::No
    } else {
        warm
    }
}

fn layout(run: &RunState, partitions: u32, groups: Vec<Option<String>>, suite: &Suite) -> Layout {
    Layout {
        base: run.queue.clone(),
        partitions,
        groups,
        payload_bytes: suite.cfg.payload_bytes,
        salt: load::salt(&run.prefix),
    }
}

/// Runs `body` on a fresh stage and releases the stage whatever happened.
macro_rules! on_stage {
    ($suite:expr, $system:expr, $kind:expr, |$stage:ident| $body:block) => {{
        let mut $stage = Stage::open($suite, $system, $kind).await?;
        let result = async { $body }.await;
        $stage.release($suite).await;
        result
    }};
}

pub async fn push_case(suite: &mut Suite, system: System, text: &str) -> Result<ScenarioResult> {
    let case = parse_case(text)?;
    let spec = ProduceSpec {
        messages: case.m.unwrap_or(suite.cfg.messages),
        seconds: suite.seconds(&case),
        producers: case.n.unwrap_or(16),
        batch: case.b.unwrap_or(100),
        partitions: case.p.unwrap_or(64),
        fresh: case.fresh,
        rate: None,
    };
    let id = format!(
        "{}push/b{}/n{}/{}",
        system.prefix(),
        spec.batch,
        spec.producers,
        case.shape_id(spec.partitions)
    );
    eprintln!(
        "-- {id}: {} producers, batch {}, {} partitions, up to {} msgs / {}s",
        spec.producers, spec.batch, spec.partitions, spec.messages, spec.seconds
    );
    on_stage!(suite, system, "push", |stage| {
        let run = RunState::shaped_with(
            suite::queue_name("push"),
            spec.messages,
            case.anon,
            case.body,
        );
        let l = layout(&run, spec.partitions, vec![None], suite);
        stage.prepare(l, warm_for(&case, Warm::Partitions)).await?;
        if let (Some(n), Stage::Queen(env)) = (case.max_size, &stage) {
            env.api.configure_max_size(&run.queue, n).await?;
        }
        stage.ready(suite).await?;
        let m = stage.measure(suite, run, &id, Some(&spec), None).await?;
        let complete = m.out.pushed >= spec.messages;
        let mut r = m.result(&id, "push", &stage, "push request");
        r.detail("complete", complete);
        anyhow::Ok(r)
    })
}

pub async fn pop_ack_case(suite: &mut Suite, system: System, text: &str) -> Result<ScenarioResult> {
    let case = parse_case(text)?;
    let partitions = case.p.unwrap_or(64);
    let fill = case.m.unwrap_or(suite.cfg.fill_messages);
    let consume = ConsumeSpec {
        groups: vec![None],
        consumers_per_group: case.c.unwrap_or(16),
        batch: case.b.unwrap_or(100),
        pop_partitions: 1,
        wait_ms: 1000,
        seconds: suite.seconds(&case) + suite.cfg.drain_seconds,
        prefilled: fill,
    };
    let id = format!(
        "{}pop-ack/b{}/c{}/{}",
        system.prefix(),
        consume.batch,
        consume.consumers_per_group,
        case.shape_id(partitions)
    );
    eprintln!(
        "-- {id}: pre-fill {fill} msgs, then {} consumers drain with batch {}",
        consume.consumers_per_group, consume.batch
    );
    on_stage!(suite, system, "popack", |stage| {
        let run = RunState::shaped_with(suite::queue_name("popack"), fill, case.anon, case.body);
        stage
            .prepare(layout(&run, partitions, vec![None], suite), Warm::No)
            .await?;
        let fill_spec = ProduceSpec {
            messages: fill,
            seconds: 300.0,
            producers: 16,
            batch: 100,
            partitions,
            fresh: case.fresh,
            rate: None,
        };
        let filled = stage
            .fill(suite, &run, &format!("{id} fill"), &fill_spec)
            .await?;
        if filled.pushed < fill {
            bail!("pre-fill pushed only {} of {fill}", filled.pushed);
        }
        stage.ready(suite).await?;
        let m = stage.measure(suite, run, &id, None, Some(&consume)).await?;
        let mut r = m.result(&id, "pop-ack", &stage, "pop request");
        r.latencies
            .insert("fill push request".into(), filled.push_latency);
        r.detail("prefilled", fill);
        r.detail(
            "fillMsgPerS",
            filled.pushed as f64 / filled.push_seconds.max(1e-9),
        );
        anyhow::Ok(r)
    })
}

/// End-to-end (queue mode) and fan-out (`g` groups) runs.
pub async fn live_case(
    suite: &mut Suite,
    system: System,
    report: &SuiteReport,
    text: &str,
    fanout: bool,
) -> Result<ScenarioResult> {
    let case = parse_case(text)?;
    let batch = case.b.unwrap_or(100);
    let producers = case.n.unwrap_or(16);
    let consumers = case.c.unwrap_or(16);
    let partitions = case.p.unwrap_or(64);
    let groups = if fanout { case.g.unwrap_or(4) } else { 1 };
    let seconds = suite.seconds(&case);
    let rate_spec = case.r.unwrap_or(Rate::Max);
    let kind = if fanout { "fanout" } else { "e2e" };
    let prefix = system.prefix();
    let shape = case.shape_id(partitions);
    let id = if fanout {
        format!("{prefix}fanout/b{batch}/n{producers}/g{groups}/c{consumers}/{shape}")
    } else {
        let r = match rate_spec {
            Rate::Max => "rmax".to_owned(),
            Rate::Fixed(v) => format!("r{v:.0}"),
            Rate::HalfOfMax(f) => format!("r{:.0}%", f * 100.0),
        };
        format!("{prefix}e2e/b{batch}/n{producers}/c{consumers}/{shape}/{r}")
    };
    let rate = match rate_spec {
        Rate::Max => None,
        Rate::Fixed(v) => Some(v),
        Rate::HalfOfMax(f) => {
            let max_id = format!("{prefix}e2e/b{batch}/n{producers}/c{consumers}/{shape}/rmax");
            let max = report
                .find(&max_id)
                .with_context(|| format!("{id} needs {max_id} to run first"))?;
            Some((max.msg_per_s * f).max(1.0))
        }
    };
    let messages = match (case.m, rate) {
        (Some(m), _) => m,
        (None, Some(r)) => ((r * seconds) as u64).max(1),
        (None, None) if fanout => suite.cfg.fill_messages,
        (None, None) => suite.cfg.messages,
    };
    let produce = ProduceSpec {
        messages,
        seconds,
        producers,
        batch,
        partitions,
        fresh: case.fresh,
        rate,
    };
    let consume = ConsumeSpec {
        groups: if fanout {
            (0..groups).map(|g| Some(format!("bench-g{g}"))).collect()
        } else {
            vec![None]
        },
        consumers_per_group: consumers,
        batch,
        pop_partitions: 1,
        wait_ms: 1000,
        seconds: seconds + suite.cfg.drain_seconds,
        prefilled: 0,
    };
    eprintln!(
        "-- {id}: {producers} producers, {} x {consumers} consumers, batch {batch}, {partitions} partitions, {}",
        consume.groups.len(),
        rate.map_or_else(|| "flat out".to_owned(), |r| format!("offered {r:.0} msg/s"))
    );
    on_stage!(suite, system, kind, |stage| {
        let run = RunState::shaped_with(suite::queue_name(kind), messages, case.anon, case.body);
        let l = layout(&run, partitions, consume.groups.clone(), suite);
        // Queue mode: create the partitions, then take the warm-up messages
        // away again; fan-out groups would each have to drain them.
        let warm = if fanout {
            Warm::No
        } else {
            warm_for(&case, Warm::PartitionsDrained)
        };
        stage.prepare(l, warm).await?;
        if !fanout {
            stage.ready(suite).await?;
        }
        let m = stage
            .measure(suite, run, &id, Some(&produce), Some(&consume))
            .await?;
        let mut r = m.result(&id, kind, &stage, "e2e");
        if let Some(rate) = rate {
            r.detail("offeredMsgPerS", rate);
        }
        r.detail("groups", groups);
        anyhow::Ok(r)
    })
}

/// Opens a session to each peer among `systems`; an unreachable one is
/// dropped from the run with one line saying so.
pub async fn open_peers(
    systems: &[System],
    args: &peers::PeerArgs,
    skipped: &mut Vec<String>,
) -> Vec<(Peer, Arc<Session>)> {
    let mut out = Vec::new();
    for s in systems {
        let System::Peer(p) = *s else { continue };
        match Session::open(p, args).await {
            Ok(session) => {
                if p.pid().is_none() {
                    eprintln!(
                        "note: no {} process on this machine: {}'s server CPU is not measured",
                        p.process(),
                        p.name()
                    );
                }
                out.push((p, Arc::new(session)));
            }
            Err(e) => {
                let line = format!(
                    "{}: not reachable ({e:#}); its scenarios are skipped",
                    p.name()
                );
                eprintln!("{line}");
                skipped.push(line);
            }
        }
    }
    out
}
