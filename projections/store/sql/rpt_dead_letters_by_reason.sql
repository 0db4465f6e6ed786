-- rpt_dead_letters_by_reason: rejected input (dead letters) by reason. Grain: one row per reason.
-- Upstream: stg_dead_letters, dated as in rpt_data_quality by the occurred_at in the raw input when
-- it can be read: in_period counts those dated in [$start, $end), undated those without a
-- readable date (whole store). Reasons with neither are left out. A date outside the years 2000
-- to 2100 (rulebook 10.3.4: refused as out_of_bounds) is no date: such a record is undated, so
-- that it still counts once in every report. A row counts its `lines` (a group of dead_letter_counts),
-- in the period when every time they state falls in it, as unattributable when their times meet
-- the period but do not all fall in it (or they state several tables and the report is of one):
-- see rpt_data_quality.
WITH d AS (
    SELECT reason,
           coalesce(stated_from >= TIMESTAMPTZ '2000-01-01 00:00:00+00' AND stated_to < TIMESTAMPTZ '2101-01-01 00:00:00+00',
                    false) AS dated,
           stated_from, stated_to, stated_table_id AS table_id, stated_tables, lines
    FROM stg_dead_letters
)
SELECT reason,
       coalesce(sum(lines) FILTER (WHERE dated AND stated_from >= $start AND stated_to < $end
                                   AND ($table_id IS NULL OR table_id = $table_id)), 0)::BIGINT AS in_period,
       coalesce(sum(lines) FILTER (WHERE NOT dated), 0)::BIGINT AS undated,
       coalesce(sum(lines) FILTER (WHERE dated AND stated_from < $end AND stated_to >= $start
                                   AND NOT (stated_from >= $start AND stated_to < $end
                                            AND ($table_id IS NULL OR coalesce(table_id = $table_id, false)))
                                   AND ($table_id IS NULL OR table_id = $table_id OR stated_tables > 1)), 0)::BIGINT
           AS unattributable
FROM d
GROUP BY reason
HAVING in_period > 0 OR undated > 0 OR unattributable > 0
ORDER BY reason
