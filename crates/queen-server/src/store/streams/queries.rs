//! Streams: registering a query, reading its state, listing queries.

use chrono::{DateTime, SecondsFormat, Utc};

use super::super::op::{with_op, DbOp};
use super::super::{col, Store, StoreError};
use super::{
    is_source_partition, query_from_row, query_source, Registration, StateFilter, StateMiss,
    StateRow, StreamQueryStats, QUERY_COLUMNS,
};
use uuid::Uuid;

impl Store {
    /// Registers a query by name; see [`Registration`].
    pub async fn register_stream_query(
        &self,
        name: &str,
        source_queue: &str,
        sink_queue: Option<&str>,
        config_hash: &str,
        reset: bool,
    ) -> Result<Registration, StoreError> {
        with_op!(self.db, DbOp::StreamsRegister, |client| {
            let tx = client.transaction().await?;
            let select = format!(
                "SELECT {QUERY_COLUMNS} FROM queen_streams.queries WHERE name = $1 FOR UPDATE"
            );
            let insert = format!(
                "INSERT INTO queen_streams.queries (id, name, source_queue, sink_queue, config_hash)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO NOTHING RETURNING {QUERY_COLUMNS}"
            );
            let existing = match tx.query_opt(select.as_str(), &[&name]).await? {
                Some(r) => Some(query_from_row(&r)?),
                None => {
                    let id = Uuid::now_v7();
                    match tx
                        .query_opt(
                            insert.as_str(),
                            &[&id, &name, &source_queue, &sink_queue, &config_hash],
                        )
                        .await?
                    {
                        Some(r) => {
                            let query = query_from_row(&r)?;
                            tx.commit().await?;
                            return Ok(Registration::Done {
                                query,
                                fresh: true,
                                reset: false,
                                cleared: 0,
                            });
                        }
                        // a concurrent registration won; a new statement sees its row
                        None => Some(query_from_row(
                            &tx.query_one(select.as_str(), &[&name]).await?,
                        )?),
                    }
                }
            };
            let Some(query) = existing else {
                return Err(StoreError::unavailable("query row vanished"));
            };
            let mismatch = query.config_hash != config_hash;
            if mismatch && !reset {
                return Ok(Registration::HashMismatch { query });
            }
            let mut cleared = 0;
            if mismatch {
                cleared = tx
                    .execute(
                        "DELETE FROM queen_streams.state WHERE query_id = $1",
                        &[&query.id],
                    )
                    .await?;
            }
            let row = tx
                .query_one(
                    &format!(
                        "UPDATE queen_streams.queries
                         SET source_queue = $2, sink_queue = $3, config_hash = $4, updated_at = now()
                         WHERE id = $1 RETURNING {QUERY_COLUMNS}"
                    ),
                    &[&query.id, &source_queue, &sink_queue, &config_hash],
                )
                .await?;
            let query = query_from_row(&row)?;
            tx.commit().await?;
            Ok(Registration::Done {
                query,
                fresh: false,
                reset: mismatch,
                cleared,
            })
        })
    }

    /// Reads state rows of (query, source partition).
    pub async fn stream_state(
        &self,
        query_id: Uuid,
        partition_id: Uuid,
        filter: &StateFilter,
    ) -> Result<Result<Vec<StateRow>, StateMiss>, StoreError> {
        with_op!(self.db, DbOp::StreamsState, |client| {
            let Some(source) = query_source(&*client, query_id).await? else {
                return Ok(Err(StateMiss::UnknownQuery));
            };
            if !is_source_partition(&*client, partition_id, &source).await? {
                return Ok(Err(StateMiss::UnknownPartition));
            }
            let stmt = client
                .prepare_cached(
                    "SELECT key, value::text AS value, updated_at FROM queen_streams.state
                     WHERE query_id = $1 AND partition_id = $2
                       AND (cardinality($3::text[]) = 0 OR key = ANY ($3))
                       AND ($4::text IS NULL OR starts_with(key, $4))
                       AND ($5::float8 IS NULL
                            OR (jsonb_typeof(value -> 'windowEnd') = 'number'
                                AND (value ->> 'windowEnd')::float8 <= $5))
                     ORDER BY key",
                )
                .await?;
            let rows = client
                .query(
                    &stmt,
                    &[
                        &query_id,
                        &partition_id,
                        &filter.keys,
                        &filter.key_prefix,
                        &filter.ripe_at_or_before,
                    ],
                )
                .await?;
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                let at: DateTime<Utc> = col(r, "updated_at")?;
                out.push(StateRow {
                    key: col(r, "key")?,
                    value: col(r, "value")?,
                    updated_at: at.to_rfc3339_opts(SecondsFormat::Millis, true),
                });
            }
            Ok(Ok(out))
        })
    }

    /// Registered queries by name, with their state row counts and the lag
    /// of their default consumer group (`streams.<name>`) on the source.
    pub async fn stream_queries(&self) -> Result<Vec<StreamQueryStats>, StoreError> {
        with_op!(self.db, DbOp::StreamsState, |client| {
            let rows = client
                .query(
                    "SELECT q.id, q.name, q.source_queue, q.sink_queue, q.config_hash,
                            (SELECT count(*) FROM queen_streams.state s
                             WHERE s.query_id = q.id) AS state_rows,
                            (SELECT coalesce(sum(greatest(p.next_offset - 1
                                     - coalesce(lc.committed_offset, 0), 0)), 0)::bigint
                             FROM queen.queues sq
                             JOIN queen.partitions p ON p.queue_id = sq.id
                             LEFT JOIN queen.log_consumers lc
                               ON lc.partition_id = p.id
                              AND lc.consumer_group = 'streams.' || q.name
                             WHERE sq.name = q.source_queue) AS lag
                     FROM queen_streams.queries q ORDER BY q.name",
                    &[],
                )
                .await?;
            rows.iter()
                .map(|r| {
                    Ok(StreamQueryStats {
                        query: query_from_row(r)?,
                        state_rows: col(r, "state_rows")?,
                        lag: col(r, "lag")?,
                    })
                })
                .collect()
        })
    }
}
