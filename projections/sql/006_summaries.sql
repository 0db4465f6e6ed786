-- Summaries the console reads instead of the events (issue 23): derived rows, kept up to date by
-- the store's writer in the transaction that stores their source rows (projections/summaries.py),
-- rebuilt from the events and rounds whenever wanted. Not a record anyone relies on: the events are.

-- Grain: table_id (every table with stored events or rounds). Upstream: events, rounds.
-- The floor's "last state" of a table: the last event, its supervisor on duty (the latest FLOOR
-- actor) and its rounds dealt with the dealer of the latest. Read by sum_floor.sql. Its devices'
-- state is the engine's own (projections/device_state.py), never recomputed in SQL.
CREATE TABLE IF NOT EXISTS sum_floor (
    table_id        VARCHAR NOT NULL,
    game            VARCHAR,
    last_event_at   TIMESTAMPTZ,
    last_seq        BIGINT,
    supervisor_id   VARCHAR,
    supervisor_seq  BIGINT,
    rounds          BIGINT,
    dealer_id       VARCHAR,
    last_round_at   TIMESTAMPTZ
);

-- Grain: one row per build of a summary (name, version). A summary without a row here was never
-- built from the whole store (a store written before it existed): the writer builds it once.
CREATE TABLE IF NOT EXISTS summary_builds (
    name      VARCHAR NOT NULL,
    version   INTEGER NOT NULL,
    built_at  TIMESTAMPTZ NOT NULL
);
