-- con_rates: rounds dealt and findings per 1,000 rounds for one dealer or one table in a period,
-- by rule and by time slot. Grain: (kind, key) where kind is 'rule' (key = rule_id) or 'slot'
-- (key = the start of the slot, UTC, as text 'YYYY-MM-DD HH:00'). Upstream: rounds, fct_detections.
-- A finding counts for the dealer of its round; $dealer or $table_id selects (the other NULL).
-- The period is [$start, $end) (NULL: open): rounds by completion, findings by detection; the
-- slots are $slot long ('hour', 'day' or 'week', as date_trunc takes them).
-- Incidents are counted: a consequence is shown under its cause and not counted again (the
-- incidents read model's definition, projections/models/incidents.py). Their rows (finding_id, rule_id,
-- severity, observed_at) come from the sum_findings summary, or in a store without it from
-- fct_detections less the consequences in $consequences (dealtrail/console/pages.py RATES_INCIDENTS).
WITH r AS (
    SELECT table_id, round_id, dealer_id, completed_at FROM rounds
    WHERE ($dealer IS NULL OR dealer_id = $dealer) AND ($table_id IS NULL OR table_id = $table_id)
      AND ($start IS NULL OR completed_at >= $start) AND ($end IS NULL OR completed_at < $end)
), f AS (  -- the period's incidents, each once (pages.py RATES_INCIDENTS: the summary or the live query)
    /*incidents*/
), total AS (SELECT count(*) AS rounds FROM r)
SELECT 'rule' AS kind, rule_id AS key, any_value(severity) AS severity, count(*) AS findings,
       (SELECT rounds FROM total) AS rounds
FROM f GROUP BY rule_id
UNION ALL
SELECT 'slot', strftime(h, '%Y-%m-%d %H:00'), NULL, sum(n_f), sum(n_r) FROM (
    SELECT date_trunc($slot, completed_at AT TIME ZONE 'UTC') AS h, 0 AS n_f, 1 AS n_r FROM r
    UNION ALL
    SELECT date_trunc($slot, observed_at AT TIME ZONE 'UTC'), 1, 0 FROM f
) GROUP BY h
ORDER BY kind, key
