-- rpt_dead_letters_by_reason: rejected input (dead letters) by reason. Grain: one row per reason.
-- Upstream: stg_dead_letters, dated as in rpt_data_quality by the occurred_at in the raw input when
-- it can be read: in_period counts those dated in [$start, $end), undated those without a
-- readable date (whole store). Reasons with neither are left out. A date outside the years 2000
-- to 2100 (rulebook 10.3.4: refused as out_of_bounds) is no date: such a record is undated, so
-- that it still counts once in every report. A row counts its `lines` (a group of dead_letter_counts).
WITH d AS (
    SELECT reason,
           CASE WHEN stated_at >= TIMESTAMPTZ '2000-01-01 00:00:00+00' AND stated_at < TIMESTAMPTZ '2101-01-01 00:00:00+00'
                THEN stated_at END AS dated,
           stated_table_id AS table_id, lines
    FROM stg_dead_letters
)
SELECT reason,
       coalesce(sum(lines) FILTER (WHERE dated >= $start AND dated < $end
                                   AND ($table_id IS NULL OR table_id = $table_id)), 0)::BIGINT AS in_period,
       coalesce(sum(lines) FILTER (WHERE dated IS NULL), 0)::BIGINT AS undated
FROM d
GROUP BY reason
HAVING in_period > 0 OR undated > 0
ORDER BY reason
