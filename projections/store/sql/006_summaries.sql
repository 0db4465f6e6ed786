-- Summaries the console reads instead of the events (issue 23): derived rows, kept up to date by
-- the store's writer in the transaction that stores their source rows (projections/store/summaries.py),
-- rebuilt from the events and rounds whenever wanted. Not a record anyone relies on: the events are.

-- Grain: table_id (every table with stored events or rounds). Upstream: events, rounds.
-- The floor's "last state" of a table: the last event, its supervisor on duty (the latest FLOOR
-- actor) and its rounds dealt with the dealer of the latest. Read by sum_floor.sql. Its devices'
-- state is the engine's own (projections/models/device_state.py), never recomputed in SQL.
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

-- Grain: (generation, finding_id). Upstream: findings, rounds. The finding half of the incidents
-- read model (rpt_findings.sql's columns: where and when each finding was detected, its latest
-- remedy status, the dealer of its round and, for a consequence, its cause), kept for every
-- generation, so the console's lists, counts and pages read one row per finding instead of
-- recomputing them from every revision and every round (sum_findings_rows.sql makes the rows).
CREATE TABLE IF NOT EXISTS sum_findings (
    generation            INTEGER NOT NULL,
    finding_id            VARCHAR NOT NULL,
    rule_id               VARCHAR NOT NULL,
    citation              VARCHAR NOT NULL,
    game                  VARCHAR NOT NULL,
    severity              VARCHAR NOT NULL,
    provisional           BOOLEAN NOT NULL,
    table_id              VARCHAR NOT NULL,
    round_id              VARCHAR,
    status                VARCHAR NOT NULL,
    message               VARCHAR NOT NULL,
    required_remedy       VARCHAR,
    evidence_event_ids    VARCHAR[] NOT NULL,
    detected_at           TIMESTAMPTZ NOT NULL,
    remedy_event_ids      VARCHAR[] NOT NULL,
    remedy_delay_seconds  DOUBLE,
    remedied_late         BOOLEAN NOT NULL,
    dealer_id             VARCHAR,
    cause_finding_id      VARCHAR
);

-- Grain: one row per stored event that came late: its seq is at or below a seq of its table stored
-- before it, in the order the store keeps (a redelivered copy with another payload, a conflicting
-- event, the second of two events with one seq, an event the reorder window had given up on).
-- Upstream: events (projections/store/summaries.py record_late). A trail in seq order adds no row. A
-- replay compares the count up to a snapshot's seq with the snapshot's late_through instead of
-- counting the table's events (dealtrail/investigate/replay.py).
CREATE TABLE IF NOT EXISTS sum_late_events (
    table_id  VARCHAR NOT NULL,
    seq       BIGINT NOT NULL,
    event_id  VARCHAR NOT NULL
);

-- Grain: one row: how many events the store held when sum_late_events was last brought up to date
-- with them. A store whose events are more or fewer (a writer of an older version stored some, an
-- archive moved some out) has a record replays do not trust until a writer builds it again.
CREATE TABLE IF NOT EXISTS sum_late_events_mark (
    events  BIGINT NOT NULL
);

-- Grain: one row per build of a summary (name, version). A summary without a row here was never
-- built from the whole store (a store written before it existed): the writer builds it once.
CREATE TABLE IF NOT EXISTS summary_builds (
    name      VARCHAR NOT NULL,
    version   INTEGER NOT NULL,
    built_at  TIMESTAMPTZ NOT NULL
);
