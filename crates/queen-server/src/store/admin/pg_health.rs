//! PostgreSQL's own state for the System view (`database` of
//! `GET /api/v1/analytics/postgres-stats`): connections, size, cache hits,
//! the oldest open transaction and the standbys streaming from the server,
//! read from the statistics views in one round trip each.

use queen_proto::system::{ConnectionCounts, DatabaseHealth, LongTransaction, StandbyLag};

use crate::store::op::{with_op, DbOp};
use crate::store::{col, rows_into, Store, StoreError};

const SUMMARY: &str = "
SELECT current_setting('server_version') AS version,
       current_database() AS name,
       pg_database_size(current_database()) AS size_bytes,
       pg_is_in_recovery() AS in_recovery,
       c.total, c.active, c.idle, c.idle_in_transaction,
       (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend') AS server_total,
       current_setting('max_connections')::bigint AS max_connections,
       (SELECT blks_hit::float8 / nullif(blks_hit + blks_read, 0)
          FROM pg_stat_database WHERE datname = current_database()) AS cache_hit_ratio
FROM (SELECT count(*) AS total,
             count(*) FILTER (WHERE state = 'active') AS active,
             count(*) FILTER (WHERE state = 'idle') AS idle,
             count(*) FILTER (WHERE state LIKE 'idle in transaction%') AS idle_in_transaction
      FROM pg_stat_activity
      WHERE datname = current_database() AND backend_type = 'client backend') c";

const LONGEST: &str = "
SELECT pid, datname::text AS database, application_name AS application, state,
       extract(epoch FROM now() - xact_start)::float8 AS seconds, left(query, 200) AS query
FROM pg_stat_activity
WHERE xact_start IS NOT NULL AND pid <> pg_backend_pid() AND backend_type = 'client backend'
ORDER BY xact_start
LIMIT 1";

const STANDBYS: &str = "
SELECT application_name AS application, host(client_addr) AS client_addr, state, sync_state,
       extract(epoch FROM replay_lag)::float8 AS replay_lag_seconds,
       CASE WHEN pg_is_in_recovery() THEN NULL
            ELSE pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint END AS lag_bytes
FROM pg_stat_replication
ORDER BY application_name";

impl Store {
    /// PostgreSQL's connections, size, cache hit ratio, oldest transaction
    /// and standbys.
    pub async fn database_health(&self) -> Result<DatabaseHealth, StoreError> {
        with_op!(self.db, DbOp::Analytics, |client| {
            let s = client.query_one(SUMMARY, &[]).await?;
            let longest = client.query_opt(LONGEST, &[]).await?;
            let standbys = client.query(STANDBYS, &[]).await?;
            let longest_transaction = match longest {
                Some(r) => Some(LongTransaction {
                    pid: col(&r, "pid")?,
                    database: col(&r, "database")?,
                    application: col(&r, "application")?,
                    state: col(&r, "state")?,
                    seconds: col(&r, "seconds")?,
                    query: col(&r, "query")?,
                }),
                None => None,
            };
            Ok(DatabaseHealth {
                version: col(&s, "version")?,
                name: col(&s, "name")?,
                size_bytes: col(&s, "size_bytes")?,
                in_recovery: col(&s, "in_recovery")?,
                connections: ConnectionCounts {
                    total: col(&s, "total")?,
                    active: col(&s, "active")?,
                    idle: col(&s, "idle")?,
                    idle_in_transaction: col(&s, "idle_in_transaction")?,
                    server_total: col(&s, "server_total")?,
                    max: col(&s, "max_connections")?,
                },
                cache_hit_ratio: col(&s, "cache_hit_ratio")?,
                longest_transaction,
                replication: rows_into(&standbys, |r| {
                    Ok(StandbyLag {
                        application: col(r, "application")?,
                        client_addr: col(r, "client_addr")?,
                        state: col(r, "state")?,
                        sync_state: col(r, "sync_state")?,
                        replay_lag_seconds: col(r, "replay_lag_seconds")?,
                        lag_bytes: col(r, "lag_bytes")?,
                    })
                })?,
            })
        })
    }
}
