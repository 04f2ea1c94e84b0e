-- No planner statistics for the message arrays of segments (issue 19).
--
-- ANALYZE of queen.segments (the planner-statistics job, and autovacuum's
-- auto-analyze) read every sampled row's message arrays, detoasting and
-- decompressing each batch of payloads, to build statistics no query uses:
-- segments are only ever found by partition_id, last_offset, first_offset,
-- created_at and deleted_offsets. Measured on a table of 5 395 segments
-- (73 MB, 100-byte payloads): 1 345 ms for ANALYZE of every column, 13.6 ms
-- for those five (docs/benchmarks.md, "Consume path, part 6").
ALTER TABLE queen.segments
    ALTER COLUMN message_ids SET STATISTICS 0,
    ALTER COLUMN transaction_ids SET STATISTICS 0,
    ALTER COLUMN trace_ids SET STATISTICS 0,
    ALTER COLUMN payloads SET STATISTICS 0,
    ALTER COLUMN producer_subs SET STATISTICS 0;
