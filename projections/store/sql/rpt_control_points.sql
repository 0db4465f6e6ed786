-- rpt_control_points: rounds dealt and incidents by category per subject and time slot, the
-- points of a control chart (issue 50). Grain: (subject_id, slot_start). Upstream: rounds (who
-- dealt each round, when it completed), sum_findings (the incidents of the session's generation,
-- each with the dealer of its round: a consequence is shown under its cause and not counted again).
-- $kind: 'dealer' (subject = the dealer of the round) or 'table'. $slot: 'shift' (8-hour shifts
-- starting at $shift_hour, +8, +16 local time), 'day' or 'week' (ISO, from Monday), on the wall
-- clock of $tz. A round counts in the slot it completed in, an incident in the slot it was
-- detected in (while its round was dealt); incidents outside any round (a device fault between
-- rounds) have no dealer and are not charted. The period is [$start, $end) (NULL: open).
-- Columns: slot_start (local wall clock, TIMESTAMP), slot_start_utc (TIMESTAMPTZ), rounds,
-- voiding, procedural, integrity.
WITH q AS (  -- per subject and quarter hour (UTC, as epoch microseconds // 15 minutes): every
    -- zone's offset from UTC is a multiple of 15 minutes, so a local shift, day or week is a union
    -- of quarter hours, and the zone is applied to a few thousand of them instead of every round
    SELECT CASE WHEN $kind = 'dealer' THEN dealer_id ELSE table_id END AS subject_id,
           epoch_us(completed_at) // 900000000 AS quarter, count(*) AS rounds,
           0 AS voiding, 0 AS procedural, 0 AS integrity
    FROM rounds
    WHERE ($start::TIMESTAMPTZ IS NULL OR completed_at >= $start::TIMESTAMPTZ)
      AND ($end::TIMESTAMPTZ IS NULL OR completed_at < $end::TIMESTAMPTZ)
    GROUP BY ALL
    UNION ALL
    SELECT CASE WHEN $kind = 'dealer' THEN dealer_id ELSE table_id END,
           epoch_us(detected_at) // 900000000, 0,
           count(*) FILTER (WHERE severity = 'voiding'), count(*) FILTER (WHERE severity = 'procedural'),
           count(*) FILTER (WHERE severity = 'integrity')
    FROM sum_findings
    WHERE generation = coalesce(getvariable('dealtrail_generation'), (SELECT max(generation) FROM generations), 1)
      AND cause_finding_id IS NULL AND round_id IS NOT NULL AND dealer_id IS NOT NULL
      AND ($start::TIMESTAMPTZ IS NULL OR detected_at >= $start::TIMESTAMPTZ)
      AND ($end::TIMESTAMPTZ IS NULL OR detected_at < $end::TIMESTAMPTZ)
    GROUP BY ALL
), s AS (
    SELECT subject_id, timezone($tz, to_timestamp(quarter * 900)) AS local_at,
           sum(rounds) AS rounds, sum(voiding) AS voiding, sum(procedural) AS procedural,
           sum(integrity) AS integrity
    FROM q GROUP BY subject_id, quarter
), b AS (
    SELECT subject_id,
           CASE $slot
               WHEN 'day' THEN date_trunc('day', local_at)
               WHEN 'week' THEN date_trunc('week', local_at)
               ELSE date_trunc('day', local_at - to_hours($shift_hour::BIGINT)) + to_hours($shift_hour::BIGINT)
                    + to_hours(8 * (hour(local_at - to_hours($shift_hour::BIGINT)) // 8))
           END AS slot_start,
           rounds, voiding, procedural, integrity
    FROM s
)
SELECT subject_id, slot_start, timezone($tz, slot_start) AS slot_start_utc, sum(rounds)::BIGINT AS rounds,
       sum(voiding)::BIGINT AS voiding, sum(procedural)::BIGINT AS procedural, sum(integrity)::BIGINT AS integrity
FROM b
GROUP BY subject_id, slot_start
HAVING sum(rounds) > 0
