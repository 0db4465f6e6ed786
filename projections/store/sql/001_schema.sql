-- dealtrail DuckDB store: append-only facts written by one process (the audit or the projector).
-- Readers open the file read-only.

-- Grain: one row per distinct dealing event (event_id + payload hash). Upstream: the event file
-- or the dealing-events topic. Exact redeliveries are dropped on insert (also a copy without the chain
-- fields of an event stored with them: projections/store/store.py SAME_FACT_SQL); a conflicting event that
-- reuses an event_id is kept beside the first (the engine raises DT-sequence-gap for it).
CREATE TABLE IF NOT EXISTS events (
    event_id      VARCHAR NOT NULL,
    payload_hash  VARCHAR NOT NULL,
    table_id      VARCHAR NOT NULL,
    game          VARCHAR NOT NULL,
    round_id      VARCHAR,
    deck_id       VARCHAR,
    seq           BIGINT NOT NULL,
    type          VARCHAR NOT NULL,
    occurred_at   TIMESTAMPTZ NOT NULL,
    recorded_at   TIMESTAMPTZ NOT NULL,
    actor_role    VARCHAR,
    actor_id      VARCHAR,
    payload       JSON NOT NULL USING COMPRESSION zstd,  -- zstd: a third of the size, written 2x faster than the default analysis
    arrival       BIGINT NOT NULL  -- file line or Kafka offset: orders one table's events within a seq
);

-- Grain: one row per finding revision (finding_id, revision). Upstream: the engine's findings
-- (embedded audit) or the findings topic. Revision 0 is the detection; later revisions record
-- remedied / overdue.
CREATE TABLE IF NOT EXISTS findings (
    finding_id            VARCHAR NOT NULL,
    revision              INTEGER NOT NULL,
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
    trigger_event_id      VARCHAR NOT NULL,
    observed_at           TIMESTAMPTZ NOT NULL,
    remedy_event_ids      VARCHAR[] NOT NULL,
    remedy_delay_seconds  DOUBLE,
    late                  BOOLEAN NOT NULL,
    rulebook_revision     INTEGER NOT NULL DEFAULT 1  -- the rulebook revision the engine applied
);
-- Stores written before the column existed hold findings of revision 1 (DuckDB cannot add a NOT
-- NULL column with IF NOT EXISTS, so the constraint follows in a second step; both are no-ops
-- once the column is there).
ALTER TABLE findings ADD COLUMN IF NOT EXISTS rulebook_revision INTEGER DEFAULT 1;
ALTER TABLE findings ALTER COLUMN rulebook_revision SET NOT NULL;

-- Grain: one row per completed round (table_id, round_id). Upstream: the engine's round state
-- at RoundCompleted.
CREATE TABLE IF NOT EXISTS rounds (
    table_id                VARCHAR NOT NULL,
    round_id                VARCHAR NOT NULL,
    game                    VARCHAR NOT NULL,
    round_no                INTEGER NOT NULL,
    dealer_id               VARCHAR NOT NULL,
    dealing_method          VARCHAR NOT NULL,
    deck_id                 VARCHAR,
    started_at              TIMESTAMPTZ NOT NULL,
    completed_at            TIMESTAMPTZ NOT NULL,
    started_event_id        VARCHAR NOT NULL,
    completed_event_id      VARCHAR NOT NULL,
    exempt_from_stub_count  BOOLEAN NOT NULL,
    stub_counted            BOOLEAN NOT NULL,
    rounds_since_stub_count INTEGER NOT NULL,
    voided                  BOOLEAN NOT NULL,
    cards_dealt             INTEGER NOT NULL,
    wagers                  INTEGER NOT NULL,
    -- dealt from a deck under a DT-deck-composition suspicion (rulebook 8a, revision 2 decision 5)
    deck_suspect            BOOLEAN NOT NULL DEFAULT false
);
-- a store written before the column existed gets it (its rounds were never judged suspect)
ALTER TABLE rounds ADD COLUMN IF NOT EXISTS deck_suspect BOOLEAN DEFAULT false;

-- Grain: one row per rejected input (source, position). Upstream: the audit's dead-letter file
-- or the dead-letter topic. Nothing is dropped silently: the raw input is kept, in `raw`, or (a
-- row the audit wrote: raw_file set, raw empty) in the store's append-only dead-letter log
-- raw_file, one JSON line per row (source, position, byte_offset, byte_length, reason, detail,
-- raw), so that a flood of rejected lines does not fill DuckDB's memory with their bytes.
-- occurred_at and table_id are what the raw input states, when it can be read (stg_dead_letters
-- reads them from `raw` for rows written before these columns).
CREATE TABLE IF NOT EXISTS dead_letters (
    source      VARCHAR NOT NULL,
    position    VARCHAR NOT NULL,
    reason      VARCHAR NOT NULL,
    detail      VARCHAR NOT NULL,
    raw         VARCHAR NOT NULL,
    raw_hash    VARCHAR NOT NULL,  -- md5 (hex) of the raw input (text, or base64 if not UTF-8); its first 8 digits in a row with raw_file
    byte_offset BIGINT,            -- where the rejected line starts in the source file (bytes)
    byte_length BIGINT,            -- its length (bytes, without its line end)
    occurred_at TIMESTAMPTZ,
    table_id    VARCHAR,
    raw_file    VARCHAR            -- the dead-letter log holding the raw input, if not in raw
);
-- a store written before the columns existed gets them (its rows keep their raw input)
ALTER TABLE dead_letters ADD COLUMN IF NOT EXISTS byte_offset BIGINT;
ALTER TABLE dead_letters ADD COLUMN IF NOT EXISTS byte_length BIGINT;
ALTER TABLE dead_letters ADD COLUMN IF NOT EXISTS occurred_at TIMESTAMPTZ;
ALTER TABLE dead_letters ADD COLUMN IF NOT EXISTS table_id VARCHAR;
ALTER TABLE dead_letters ADD COLUMN IF NOT EXISTS raw_file VARCHAR;

-- Grain: one row per group of one chunk of an audit's counted rejected lines (source, batch_key,
-- reason, and the table and time the lines state, as far as the chunk keeps them), with the lines
-- it counts. Upstream: the audit, for the rejected lines of a partition of the file's tables past
-- its first DEAD_LETTER_ROWS (dealtrail/ingest/audit.py): each such line is one line of the
-- store's dead-letter log raw_file (source, position, byte offset and length, reason, detail, raw
-- input) and is counted here, so that a flood of rejected lines costs DuckDB a few rows per chunk
-- of at most 2,000 instead of a row per line, which DuckDB keeps in its memory (issue 32). A chunk
-- is cut from its partition's rejected lines in line order (2,000 lines or 4 MiB), so it is the
-- same whatever the number of audit workers; batch_key is the md5 of the chunk's (position, first
-- 8 hex digits of the md5 of raw) list: a re-run adds nothing. A chunk's rows are at most 32, or
-- three per reason and kept table, whatever its lines state: one per stated (reason, table, time) when there
-- are at most 32 of them (occurred_at the time); else the times in UTC quarter hours, the table
-- kept when the chunk states at most 8; else one per reason, kept table and kind of time (in
-- 2000-2100, out of it, none). first_occurred_at and last_occurred_at are always the earliest and
-- latest time the group's lines state, stated_tables how many tables they state (table_id is
-- NULL when more than one). stg_dead_letters counts these beside the rows of dead_letters.
CREATE TABLE IF NOT EXISTS dead_letter_counts (
    source          VARCHAR NOT NULL,
    batch_key       VARCHAR NOT NULL,
    first_position  VARCHAR NOT NULL,  -- the group's first and last rejected line
    last_position   VARCHAR NOT NULL,
    reason          VARCHAR NOT NULL,
    table_id        VARCHAR,           -- what the raw input states, when it can be read
    occurred_at     TIMESTAMPTZ,
    lines           BIGINT NOT NULL,   -- rejected lines in the group
    raw_file        VARCHAR NOT NULL   -- the dead-letter log holding each line
);
-- a store written before the columns existed gets them (its groups state one time and table each)
ALTER TABLE dead_letter_counts ADD COLUMN IF NOT EXISTS first_occurred_at TIMESTAMPTZ;
ALTER TABLE dead_letter_counts ADD COLUMN IF NOT EXISTS last_occurred_at TIMESTAMPTZ;
ALTER TABLE dead_letter_counts ADD COLUMN IF NOT EXISTS stated_tables BIGINT;

-- Grain: one row per (consumer, topic, partition): the next Kafka offset to read, written in the
-- same transaction as the rows it covers (the projector commits to Kafka only after).
CREATE TABLE IF NOT EXISTS offsets (
    consumer    VARCHAR NOT NULL,
    topic       VARCHAR NOT NULL,
    partition   INTEGER NOT NULL,
    next_offset BIGINT NOT NULL
);

-- Grain: one row per (table_id, first_seq, last_seq, last_event_id): a table's engine state at
-- the end of an audited file, so that the audit of a file that continues it (the next shift of
-- the same tables) goes on from there instead of needing a TableConfigured event. first_seq is
-- the seq of the table's first event in that file. Upstream: the embedded audit. `state` is the
-- JSON of streams.engine.state.dump_state.
CREATE TABLE IF NOT EXISTS table_states (
    table_id      VARCHAR NOT NULL,
    first_seq     BIGINT NOT NULL,
    last_seq      BIGINT NOT NULL,
    last_event_id VARCHAR NOT NULL,
    source        VARCHAR NOT NULL,  -- the audited file
    state         JSON NOT NULL USING COMPRESSION zstd,
    stamps        JSON NOT NULL  -- [seq, prev_hash, hash] of the last events the audit stamped (schemas.chain.Chainer.stamps)
);

-- Grain: one row per (table_id, last_seq, last_event_id, engine_version, rulebook_revision): a
-- table's engine state after its event last_seq, kept every DEALTRAIL_SNAPSHOT_EVERY events of the
-- table and at each UTC day boundary, so that a replay starts near the window instead of at the
-- table's first event. An optimisation, never the source of truth: the events are, and every
-- snapshot can be dropped. Upstream: the embedded audit, written in the same transaction as the
-- events before it. `state` is the JSON of streams.engine.state.dump_state and `state_sha256` its
-- SHA-256; `events_through` is how many stored events of the table had a seq <= last_seq when it
-- was written (a later event with such a seq makes the snapshot unfit, and a replay skips it).
-- `state` is stored uncompressed: DuckDB decompresses a ZSTD string column a whole vector at a
-- time, so fetching one 64 KB state of a 10-day table (869 snapshots) took 25 to 65 ms against
-- 2 ms uncompressed (bench/bench_audit.py's replay lines); it costs about 55 MB more in a 10-day
-- table's 140 MB store. A store made before keeps its ZSTD column.
CREATE TABLE IF NOT EXISTS table_snapshots (
    table_id          VARCHAR NOT NULL,
    last_seq          BIGINT NOT NULL,
    last_event_id     VARCHAR NOT NULL,
    last_hash         VARCHAR,  -- the chain hash of the last event (NULL for an unchained table)
    last_occurred_at  TIMESTAMPTZ NOT NULL,
    events_through    BIGINT NOT NULL,
    engine_version    VARCHAR NOT NULL,
    rulebook_revision INTEGER NOT NULL,
    state_sha256      VARCHAR NOT NULL,
    state             JSON NOT NULL USING COMPRESSION uncompressed
);
-- `late_through`: how many late events of the table up to last_seq the store had recorded when the
-- snapshot was written (sum_late_events, 006_summaries.sql). While the count is the same, no event
-- with a seq <= last_seq came since, and a replay trusts events_through without counting the
-- table's history; NULL for a snapshot written before the column (the replay counts).
ALTER TABLE table_snapshots ADD COLUMN IF NOT EXISTS late_through BIGINT;
-- `events_partition`, `events_offset`: what a worker's snapshot (from the snapshots topic) covers:
-- the table's events of that partition of the events topic with an arrival (Kafka offset) at or
-- below events_offset and a seq <= last_seq, which events_through counts. Its late_through is
-- NULL when the store holds an event with such a seq that arrived after it (the snapshot lacks
-- it, so a replay counts and skips it). NULL for the audit's and the re-audit's snapshots.
ALTER TABLE table_snapshots ADD COLUMN IF NOT EXISTS events_partition INTEGER;
ALTER TABLE table_snapshots ADD COLUMN IF NOT EXISTS events_offset BIGINT;

-- Grain: one row per generation of findings. Generation 1 is what the audit and the projector
-- write (implicit: no row is needed for it); `dealtrail reaudit` adds generation N+1, the stored
-- events re-applied with the engine in force, complete for the whole store (findings of tables
-- and times it did not re-apply are carried over from generation N). Findings of every
-- generation stay stored; the views read the latest one.
CREATE TABLE IF NOT EXISTS generations (
    generation        INTEGER NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL,
    previous          INTEGER NOT NULL,  -- the generation it was compared with
    rulebook_revision INTEGER NOT NULL,
    engine_version    VARCHAR NOT NULL,
    scope             VARCHAR NOT NULL,  -- what was re-applied: "all tables", "table T", a period
    tables            INTEGER NOT NULL,
    events            BIGINT NOT NULL
);

-- Stores written before generations hold generation 1 only.
ALTER TABLE findings ADD COLUMN IF NOT EXISTS generation INTEGER DEFAULT 1;
