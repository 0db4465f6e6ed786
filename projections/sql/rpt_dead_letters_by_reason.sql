-- rpt_dead_letters_by_reason: rejected input (dead letters) by reason. Grain: one row per reason.
-- Upstream: dead_letters, dated as in rpt_data_quality by the occurred_at in the raw input when
-- it can be read: in_period counts those dated in [$start, $end), undated those without a
-- readable date (whole store). Reasons with neither are left out.
WITH d AS (
    SELECT reason,
           TRY_CAST(json_extract_string(TRY_CAST(raw AS JSON), '$.occurred_at') AS TIMESTAMPTZ) AS dated,
           json_extract_string(TRY_CAST(raw AS JSON), '$.table_id') AS table_id
    FROM dead_letters
)
SELECT reason,
       count(*) FILTER (WHERE dated >= $start AND dated < $end
                          AND ($table_id IS NULL OR table_id = $table_id)) AS in_period,
       count(*) FILTER (WHERE dated IS NULL) AS undated
FROM d
GROUP BY reason
HAVING in_period > 0 OR undated > 0
ORDER BY reason
