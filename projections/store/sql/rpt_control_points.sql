-- rpt_control_points: rounds dealt and incidents by category per subject and time slot, the
-- points of a control chart (issue 50). Grain: (subject_id, slot_start). Upstream: rounds (who
-- dealt each round, when it completed), sum_findings (the incidents of the session's generation:
-- a consequence is shown under its cause and not counted again).
-- $kind: 'dealer' (subject = the dealer of the round) or 'table'. $slot: 'shift' (8-hour shifts
-- starting at $shift_hour, +8, +16 local time), 'day' or 'week' (ISO, from Monday), on the wall
-- clock of $tz. A finding counts in the slot of the round it was raised in (its exposure is that
-- round); findings outside any round (a device fault between rounds) are not charted. The
-- period is [$start, $end) by round completion (NULL: open). Columns: slot_start (local wall
-- clock, TIMESTAMP), slot_start_utc (TIMESTAMPTZ), rounds, voiding, procedural, integrity.
WITH r AS (
    SELECT CASE WHEN $kind = 'dealer' THEN dealer_id ELSE table_id END AS subject_id, table_id, round_id,
           timezone($tz, completed_at) AS local_at
    FROM rounds
    WHERE ($start::TIMESTAMPTZ IS NULL OR completed_at >= $start::TIMESTAMPTZ)
      AND ($end::TIMESTAMPTZ IS NULL OR completed_at < $end::TIMESTAMPTZ)
), f AS (  -- one row per round with incidents, counted by category
    SELECT table_id, round_id,
           count(*) FILTER (WHERE severity = 'voiding') AS voiding,
           count(*) FILTER (WHERE severity = 'procedural') AS procedural,
           count(*) FILTER (WHERE severity = 'integrity') AS integrity
    FROM sum_findings
    WHERE generation = coalesce(getvariable('dealtrail_generation'), (SELECT max(generation) FROM generations), 1)
      AND cause_finding_id IS NULL AND round_id IS NOT NULL
      AND ($start::TIMESTAMPTZ IS NULL OR detected_at >= $start::TIMESTAMPTZ - INTERVAL 1 DAY)
    GROUP BY table_id, round_id
), s AS (
    SELECT r.subject_id,
           CASE $slot
               WHEN 'day' THEN date_trunc('day', r.local_at)
               WHEN 'week' THEN date_trunc('week', r.local_at)
               ELSE date_trunc('day', r.local_at - to_hours($shift_hour::BIGINT)) + to_hours($shift_hour::BIGINT)
                    + to_hours(8 * (hour(r.local_at - to_hours($shift_hour::BIGINT)) // 8))
           END AS slot_start,
           coalesce(f.voiding, 0) AS voiding, coalesce(f.procedural, 0) AS procedural,
           coalesce(f.integrity, 0) AS integrity
    FROM r LEFT JOIN f ON f.table_id = r.table_id AND f.round_id = r.round_id
)
SELECT subject_id, slot_start, timezone($tz, slot_start) AS slot_start_utc, count(*) AS rounds,
       sum(voiding)::BIGINT AS voiding, sum(procedural)::BIGINT AS procedural, sum(integrity)::BIGINT AS integrity
FROM s
GROUP BY subject_id, slot_start
