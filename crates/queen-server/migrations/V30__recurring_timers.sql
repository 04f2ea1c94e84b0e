-- Recurring timers (issue 38, item 5). A timer with a schedule (an interval
-- in milliseconds, or a five-field cron expression in a named time zone) is
-- re-armed by its fire instead of deleted: `tick_at` is the tick the next
-- fire stands for (`deliver_at` may be later while a failed fire backs off),
-- `fires` counts the fires so far. One-shot timers keep all of these NULL
-- (`fires` 0).
ALTER TABLE queen.timers
    ADD COLUMN interval_ms bigint,
    ADD COLUMN cron        text,
    ADD COLUMN timezone    text,
    ADD COLUMN catch_up    text,
    ADD COLUMN tick_at     timestamptz,
    ADD COLUMN fires       bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT timers_one_schedule CHECK (interval_ms IS NULL OR cron IS NULL),
    ADD CONSTRAINT timers_recurring_ticks
        CHECK ((interval_ms IS NULL AND cron IS NULL) = (tick_at IS NULL)),
    ADD CONSTRAINT timers_catch_up CHECK (catch_up IN ('one', 'none'));
