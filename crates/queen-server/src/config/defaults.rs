//! Every default of the configuration, each with why it is that value. A
//! constant is named after its variable. "The reference's" means the value
//! the reference Queen broker uses (http-api.md section 7), kept so that a
//! deployment's environment means the same thing here.

use std::net::{IpAddr, Ipv4Addr};

// Listening and identity.

/// `HOST`: every interface, the reference's.
pub(super) const HOST: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
/// `PORT`: the reference's, which the official clients assume.
pub(super) const PORT: u16 = 6632;
/// Replica name without `QUEEN_SERVER_ID`, `WORKER_ID` or `HOSTNAME`: names the product.
pub(super) const SERVER_ID: &str = "queen";
/// `MAX_BODY_BYTES`, 16 MiB: large enough for big batches, small enough to bound memory per request.
pub(super) const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// `HTTP_HEADER_TIMEOUT_MS`, 10 s: a slow mobile link sends a request head in well under a
/// second; a client trickling one byte at a time is cut off this long after it started.
pub(super) const HTTP_HEADER_TIMEOUT_MS: u64 = 10_000;
/// `HTTP_IDLE_TIMEOUT_MS`, 30 s: longer than the clients' pools keep an idle connection
/// (httpx 5 s, Node's agents 4-5 s), so the broker is not the side that closes under a client's
/// feet; short enough that abandoned connections do not pile up.
pub(super) const HTTP_IDLE_TIMEOUT_MS: u64 = 30_000;
/// `SHUTDOWN_DRAIN_MS`, 6 s: HAProxy's default health check (`inter 2s`, `fall 3`) takes a
/// server out of rotation 6 s after it starts failing; deploy/haproxy.cfg (`inter 1s`, `fall 2`)
/// within about 2 s. The broker keeps serving that long after SIGTERM while `/health` says
/// `draining`, so no request reaches it once it stops accepting.
pub(super) const SHUTDOWN_DRAIN_MS: u64 = 6_000;
/// `SHUTDOWN_TIMEOUT_MS`, 20 s: the drain plus time for requests in flight (a push is answered
/// in milliseconds, a parked long poll at once); inside Kubernetes' default grace period of
/// 30 s and Docker's `stop_grace_period` of deploy/compose.yaml.
pub(super) const SHUTDOWN_TIMEOUT_MS: u64 = 20_000;
/// `HTTP_BODY_TIMEOUT_MS`, 60 s: a full 16 MiB body at 300 KiB/s; a stalled upload ends here.
pub(super) const HTTP_BODY_TIMEOUT_MS: u64 = 60_000;
/// `HTTP_MAX_CONNECTIONS`: far above what the clients' pools open, far below the
/// file-descriptor limits of a container.
pub(super) const HTTP_MAX_CONNECTIONS: usize = 4_096;
/// `MAX_PUSH_ITEMS`: ten times the clients' largest batch; bounds the rows of one push.
pub(super) const MAX_PUSH_ITEMS: usize = 10_000;
/// `MAX_TRANSACTION_OPERATIONS`: one transaction holds its partition locks until it commits,
/// so it is kept to what commits in well under a second.
pub(super) const MAX_TRANSACTION_OPERATIONS: usize = 1_000;
/// `MAX_PAYLOAD_DEPTH`: deeper than any real document, shallow enough that every reader
/// (this broker's, the clients' JSON parsers, PostgreSQL's jsonb) can parse it back.
pub(super) const MAX_PAYLOAD_DEPTH: usize = 64;
/// `MEMORY_TRIM_INTERVAL_MS`, 10 s: memory a burst took is back with the system within
/// seconds, and trims stay rare (docs/benchmarks.md, "Memory after big requests").
pub(super) const MEMORY_TRIM_INTERVAL_MS: u64 = 10_000;
// `TOKIO_WORKER_THREADS` has none: unset, the runtime runs one thread per CPU.

/// `LOG_LEVEL`: the reference's; routine events without the debug detail.
pub(super) const LOG_LEVEL: &str = "info";
/// `LOG_FORMAT`: lines for a human; `json` is for log shippers.
pub(super) const LOG_FORMAT: &str = "text";

// PostgreSQL: the reference's defaults throughout.

/// `PG_HOST`: a database on the same machine, the reference's.
pub(super) const PG_HOST: &str = "localhost";
/// `PG_PORT`: PostgreSQL's own port.
pub(super) const PG_PORT: u16 = 5432;
/// `PG_USER`: the superuser every installation has, the reference's.
pub(super) const PG_USER: &str = "postgres";
/// `PG_PASSWORD`: the reference's (never logged).
pub(super) const PG_PASSWORD: &str = "postgres";
/// `PG_DB`: the database every installation has, the reference's.
pub(super) const PG_DB: &str = "postgres";
/// `PG_USE_SSL`: plain connections, the reference's; TLS is opt-in.
pub(super) const PG_USE_SSL: bool = false;
/// `PG_SSL_REJECT_UNAUTHORIZED`: with TLS, an unverified server is refused (the reference's).
pub(super) const PG_SSL_REJECT_UNAUTHORIZED: bool = true;
/// `DB_POOL_SIZE`: the reference's pool size.
pub(super) const DB_POOL_SIZE: usize = 150;
/// `DB_IDLE_TIMEOUT`, 30 s: the reference's; idle connections go back to PostgreSQL.
pub(super) const DB_IDLE_TIMEOUT_MS: u64 = 30_000;
/// `DB_CONNECTION_TIMEOUT`, 2 s: the reference's; a dead database is noticed fast.
pub(super) const DB_CONNECTION_TIMEOUT_MS: u64 = 2_000;
/// `DB_STATEMENT_TIMEOUT`, 30 s: the reference's; bounds a runaway statement.
pub(super) const DB_STATEMENT_TIMEOUT_MS: u64 = 30_000;
/// `DB_LOCK_TIMEOUT`, 10 s: the reference's; a stuck lock fails the request instead of hanging it.
pub(super) const DB_LOCK_TIMEOUT_MS: u64 = 10_000;
/// `DB_KEEPALIVES_IDLE`, 60 s: the reference's; an idle link is probed after a minute.
pub(super) const DB_KEEPALIVES_IDLE_SECS: u64 = 60;
/// `DB_KEEPALIVES_INTERVAL`, 10 s: the reference's gap between unanswered probes.
pub(super) const DB_KEEPALIVES_INTERVAL_SECS: u64 = 10;
/// `DB_KEEPALIVES_COUNT`: the reference's three unanswered probes before the link is dropped.
pub(super) const DB_KEEPALIVES_COUNT: u32 = 3;
/// `DB_TCP_USER_TIMEOUT_MS`, 30 s: the reference's; data unacknowledged this long drops the link.
pub(super) const DB_TCP_USER_TIMEOUT_MS: u64 = 30_000;
/// `DB_PROBE_INTERVAL_MS`, 1 s: how often the liveness probe asks `SELECT 1`; one tiny query a second.
pub(super) const DB_PROBE_INTERVAL_MS: u64 = 1_000;
/// `DB_PROBE_TIMEOUT_MS`, 5 s: an answer slower than this means a hung server, far above
/// what a loaded but working server takes for `SELECT 1`.
pub(super) const DB_PROBE_TIMEOUT_MS: u64 = 5_000;
/// Added to `DB_STATEMENT_TIMEOUT` for the client-side deadline of one database operation
/// (the reference's in-flight deadline is the statement timeout plus 5 s too).
pub(super) const DB_OP_DEADLINE_MARGIN_MS: u64 = 5_000;

// Pops and long polling: the reference's defaults throughout.

/// `DEFAULT_BATCH_SIZE`: one message per pop, the reference's.
pub(super) const DEFAULT_BATCH_SIZE: u32 = 1;
/// `DEFAULT_TIMEOUT`, 30 s: the reference's long-poll budget.
pub(super) const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// `DEFAULT_SUBSCRIPTION_MODE`: empty, which is `all` (from the oldest message), the reference's.
pub(super) const DEFAULT_SUBSCRIPTION_MODE: &str = "";
/// `POP_WAIT_INITIAL_INTERVAL_MS`, 100 ms: the reference's first re-check of a parked pop.
pub(super) const POP_WAIT_INITIAL_INTERVAL_MS: u64 = 100;
/// `POP_WAIT_BACKOFF_THRESHOLD`: the reference's three empty re-checks before backing off.
pub(super) const POP_WAIT_BACKOFF_THRESHOLD: u32 = 3;
/// `POP_WAIT_BACKOFF_MULTIPLIER`: the reference's doubling of the re-check interval.
pub(super) const POP_WAIT_BACKOFF_MULTIPLIER: f64 = 2.0;
/// `POP_WAIT_MAX_INTERVAL_MS`, 1 s: the reference's; the most a lost wake-up delays a parked pop.
pub(super) const POP_WAIT_MAX_INTERVAL_MS: u64 = 1_000;
/// `QUEEN_POP_AUTOPILOT`: the broker sizes the pops that ask it to (`autopilot=true`).
pub(super) const QUEEN_POP_AUTOPILOT: &str = "on";
/// `QUEEN_POP_AUTOPILOT_BATCH`: the batch autopilot starts from, the reference's 100.
pub(super) const QUEEN_POP_AUTOPILOT_BATCH: u32 = 100;
/// `QUEEN_POP_AUTOPILOT_MAX_BATCH`: the most autopilot grows a batch to for a busy lane.
pub(super) const QUEEN_POP_AUTOPILOT_MAX_BATCH: u32 = 1_000;
/// `QUEEN_POP_AUTOPILOT_DRAIN_MS`, 200 ms: autopilot sizes a busy lane's batch to what
/// it delivers in this long (the reference's 2.x drain time).
pub(super) const QUEEN_POP_AUTOPILOT_DRAIN_MS: u64 = 200;
/// `QUEUE_CONFIG_MAX_AGE_MS`, 5 s: a lost config invalidation costs at most this long.
pub(super) const QUEUE_CONFIG_MAX_AGE_MS: u64 = 5_000;
/// `QUEEN_RECONCILE_INTERVAL_MS`, 5 s: a maintenance flag set on another replica reaches this one within this time.
pub(super) const QUEEN_RECONCILE_INTERVAL_MS: u64 = 5_000;

// The mesh (high-availability.md section 2 is the authority).

/// `QUEEN_SYNC_ENABLED`: the mesh may start; it still needs peers.
pub(super) const QUEEN_SYNC_ENABLED: bool = true;
/// `QUEEN_MESH_PORT`: the HA design's, next to the HTTP port.
pub(super) const QUEEN_MESH_PORT: u16 = 6633;
/// `QUEEN_MESH_AUTH`: HMAC over the HELLO nonce, the seed design.
pub(super) const QUEEN_MESH_AUTH: &str = "hmac";
/// `QUEEN_MESH_HANDSHAKE_TIMEOUT_MS`, 5 s: one deadline for a whole handshake; a real one takes a round trip.
pub(super) const QUEEN_MESH_HANDSHAKE_TIMEOUT_MS: u64 = 5_000;
/// `QUEEN_MESH_MAX_UNAUTHENTICATED`, 64: far above a three-replica cluster's reconnects, far below memory trouble.
pub(super) const QUEEN_MESH_MAX_UNAUTHENTICATED: usize = 64;
/// `QUEEN_MESH_MAX_UNAUTHENTICATED_PER_ADDR`, 8: a peer opens one connection at a time.
pub(super) const QUEEN_MESH_MAX_UNAUTHENTICATED_PER_ADDR: usize = 8;
/// `QUEEN_SYNC_HEARTBEAT_MS`, 1 s: the HA design's period; a dead peer is noticed within seconds.
pub(super) const QUEEN_SYNC_HEARTBEAT_MS: u64 = 1_000;

// Background jobs: the reference's defaults throughout.

/// `RETENTION_INTERVAL`, 5 min: the reference's cadence of the retention job.
pub(super) const RETENTION_INTERVAL_MS: u64 = 300_000;
/// `RETENTION_BATCH_SIZE`: the reference's; bounds one delete statement.
pub(super) const RETENTION_BATCH_SIZE: i32 = 1_000;
/// `PARTITION_CLEANUP_DAYS`: the reference's month before an empty, idle partition goes.
pub(super) const PARTITION_CLEANUP_DAYS: i32 = 30;
/// `METRICS_RETENTION_DAYS`: the reference's quarter of per-replica statistics.
pub(super) const METRICS_RETENTION_DAYS: i32 = 90;
/// `EVICTION_INTERVAL`, 1 min: the reference's cadence of the `maxWaitTimeSeconds` eviction.
pub(super) const EVICTION_INTERVAL_MS: u64 = 60_000;
/// `EVICTION_BATCH_SIZE`: the reference's; bounds one eviction pass per cursor.
pub(super) const EVICTION_BATCH_SIZE: i32 = 1_000;
/// `STATS_INTERVAL_MS`, 10 s: the reference's period of the throughput rows.
pub(super) const STATS_INTERVAL_MS: u64 = 10_000;

/// `METRICS_QUEUE_SERIES_MAX`, 1 000: queues given the reference's per-queue
/// series at one scrape (seven series each), the busiest of the last minute
/// first; 7 000 series stay a cheap scrape for Prometheus.
pub(super) const METRICS_QUEUE_SERIES_MAX: usize = 1_000;
/// `EPHEMERAL_MAX_BYTES`, 256 MiB: the contract's broker-wide bound on ephemeral contents.
pub(super) const EPHEMERAL_MAX_BYTES: u64 = 256 << 20;
/// `EPHEMERAL_IDLE_SECONDS`, 300 s: the contract's idle time before an implicit queue is collected.
pub(super) const EPHEMERAL_IDLE_SECONDS: u64 = 300;
/// `EPHEMERAL_SWEEP_INTERVAL_MS`, 2 s: how often idle queues are collected and byte counts refreshed.
pub(super) const EPHEMERAL_SWEEP_INTERVAL_MS: u64 = 2_000;

// The disk spool.

/// `FILE_BUFFER_FLUSH_MS`, 100 ms: the reference's; replay starts soon after PostgreSQL is back.
pub(super) const FILE_BUFFER_FLUSH_MS: u64 = 100;
/// `FILE_BUFFER_MAX_BATCH`: the reference's records per replay call.
pub(super) const FILE_BUFFER_MAX_BATCH: u64 = 100;
/// `FILE_BUFFER_EVENTS_PER_FILE`: the reference's records per segment file.
pub(super) const FILE_BUFFER_EVENTS_PER_FILE: u64 = 10_000;
/// `FILE_BUFFER_MAX_BYTES`, 1 GiB: hours of a busy broker's pushes, well below a typical data disk.
pub(super) const FILE_BUFFER_MAX_BYTES: u64 = 1 << 30;
/// `FILE_BUFFER_DIR` for root without `XDG_STATE_HOME`: the reference's Linux directory.
pub(super) const FILE_BUFFER_DIR_SYSTEM: &str = "/var/lib/queen/buffers";

// JWT authentication: the reference's defaults, where it has one.

/// `JWT_ENABLED`: off, the reference's; a stock broker is open.
pub(super) const JWT_ENABLED: bool = false;
/// `JWT_ALGORITHM`: a shared secret, the reference's.
pub(super) const JWT_ALGORITHM: &str = "HS256";
/// `JWT_JWKS_REFRESH_INTERVAL`, an hour: the reference's; rotated keys arrive within it.
pub(super) const JWT_JWKS_REFRESH_INTERVAL_SECS: u64 = 3_600;
/// `JWT_JWKS_TIMEOUT_MS`, 5 s: the reference's bound on one fetch of the key set.
pub(super) const JWT_JWKS_TIMEOUT_MS: u64 = 5_000;
/// `JWT_JWKS_MIN_REFETCH_MS`, 10 s: a flood of tokens with unknown key ids cannot hammer the identity provider.
pub(super) const JWT_JWKS_MIN_REFETCH_MS: u64 = 10_000;
/// `JWT_CLOCK_SKEW`, 30 s: the reference's leeway on `exp` and `nbf`.
pub(super) const JWT_CLOCK_SKEW_SECS: u64 = 30;
/// `JWT_ALLOW_NO_EXP`: off; a token that never expires is a leaked credential forever.
pub(super) const JWT_ALLOW_NO_EXP: bool = false;
/// `JWT_SKIP_PATHS`: the reference's public paths (health checks, scrapers, the dashboard).
pub(super) const JWT_SKIP_PATHS: &str = "/health,/metrics/prometheus,/metrics,/";
/// `JWT_ROLES_CLAIM`: the reference's claim holding one role.
pub(super) const JWT_ROLES_CLAIM: &str = "role";
/// `JWT_ROLES_ARRAY_CLAIM`: the reference's claim holding a list of roles.
pub(super) const JWT_ROLES_ARRAY_CLAIM: &str = "roles";
/// `JWT_ROLE_ADMIN`: the reference's name of the admin level.
pub(super) const JWT_ROLE_ADMIN: &str = "admin";
/// `JWT_ROLE_READ_WRITE`: the reference's name of the read-write level.
pub(super) const JWT_ROLE_READ_WRITE: &str = "read-write";
/// `JWT_ROLE_READ_ONLY`: the reference's name of the read-only level.
pub(super) const JWT_ROLE_READ_ONLY: &str = "read-only";
