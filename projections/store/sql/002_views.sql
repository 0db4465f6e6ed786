-- findings_generation: the finding revisions of one generation (grain: finding_id, revision):
-- the one a reader named with SET VARIABLE dealtrail_generation = N (`report --generation N`),
-- else the latest. Upstream: findings, generations.
CREATE OR REPLACE VIEW findings_generation AS
SELECT * FROM findings
WHERE generation = coalesce(getvariable('dealtrail_generation'), (SELECT max(generation) FROM generations), 1);

-- dim_findings: the latest revision of each finding of that generation (grain: finding_id).
-- Upstream: findings_generation.
CREATE OR REPLACE VIEW dim_findings AS
SELECT * EXCLUDE (rn) FROM (
    SELECT f.*, row_number() OVER (PARTITION BY finding_id ORDER BY revision DESC) AS rn
    FROM findings_generation f
) WHERE rn = 1;

-- fct_detections: revision 0 of each finding, i.e. when and where it was detected
-- (grain: finding_id). Upstream: findings_generation.
CREATE OR REPLACE VIEW fct_detections AS
SELECT d.*, l.status AS current_status, l.remedy_delay_seconds AS current_remedy_delay_seconds,
       l.late AS current_late, l.remedy_event_ids AS current_remedy_event_ids
FROM findings_generation d JOIN dim_findings l USING (finding_id)
WHERE d.revision = 0;

-- dim_offsets: the latest committed offset per (consumer, topic, partition). Upstream: offsets.
CREATE OR REPLACE VIEW dim_offsets AS
SELECT consumer, topic, partition, max(next_offset) AS next_offset
FROM offsets GROUP BY ALL;

-- stg_dead_letters: the dead letters with the time and table their raw input states (grain: one
-- row per dead letter of dead_letters, and one per group of dead_letter_counts; `lines` is how many
-- rejected inputs a row stands for, 1 for a dead_letters row: count with sum(lines)): stated_at and
-- stated_table_id come from the columns the writer fills on insert, else (a row written before
-- them) from the stored raw input; NULL when the input states none that can be read; row_no is
-- the dead_letters rowid (rows are only appended; NULL for a group: its rowid is in
-- dead_letter_counts). stated_from and stated_to are the earliest and latest time the row's lines
-- state (stated_at for a dead letter and for a group of one time; a group whose lines state
-- several has stated_at NULL), stated_tables how many tables they state (0 or 1 for a dead
-- letter; stated_table_id is NULL when more than one). A period counts a row whose stated_from
-- and stated_to both fall in it (rpt_data_quality). Upstream: dead_letters, dead_letter_counts.
CREATE OR REPLACE VIEW stg_dead_letters AS
SELECT d.*, d.stated_at AS stated_from, d.stated_at AS stated_to,
       CASE WHEN d.stated_table_id IS NULL THEN 0 ELSE 1 END::BIGINT AS stated_tables
FROM (
    SELECT d.*, d.rowid AS row_no, 1::BIGINT AS lines,
           coalesce(d.occurred_at,
                    TRY_CAST(json_extract_string(TRY_CAST(d.raw AS JSON), '$.occurred_at') AS TIMESTAMPTZ)) AS stated_at,
           coalesce(d.table_id, json_extract_string(TRY_CAST(d.raw AS JSON), '$.table_id')) AS stated_table_id
    FROM dead_letters d
) d
UNION ALL BY NAME
SELECT c.source, c.first_position AS position, c.reason, c.occurred_at, c.table_id, c.raw_file, c.lines,
       c.occurred_at AS stated_at, c.table_id AS stated_table_id,
       coalesce(c.first_occurred_at, c.occurred_at) AS stated_from,
       coalesce(c.last_occurred_at, c.occurred_at) AS stated_to,
       coalesce(c.stated_tables, CASE WHEN c.table_id IS NULL THEN 0 ELSE 1 END)::BIGINT AS stated_tables
FROM dead_letter_counts c;
