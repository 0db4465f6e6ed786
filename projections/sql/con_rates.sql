-- con_rates: rounds dealt and findings per 1,000 rounds for one dealer or one table, by rule and
-- by hour. Grain: (kind, key) where kind is 'rule' (key = rule_id) or 'hour' (key = the hour,
-- UTC, as text). Upstream: rounds, fct_detections.
-- A finding counts for the dealer of its round; $dealer or $table_id selects (the other NULL).
-- Incidents are counted: the consequences in $consequences (finding IDs, from the incidents read
-- model, projections/incidents.py) are shown under their cause and not counted again.
WITH r AS (
    SELECT table_id, round_id, dealer_id, completed_at FROM rounds
    WHERE ($dealer IS NULL OR dealer_id = $dealer) AND ($table_id IS NULL OR table_id = $table_id)
), f AS (
    SELECT d.finding_id, d.rule_id, d.severity, d.observed_at
    FROM fct_detections d
    WHERE ($table_id IS NULL OR d.table_id = $table_id)
      AND NOT list_contains($consequences, d.finding_id)
      AND ($dealer IS NULL OR EXISTS (SELECT 1 FROM r WHERE r.table_id = d.table_id AND r.round_id = d.round_id))
), total AS (SELECT count(*) AS rounds FROM r)
SELECT 'rule' AS kind, rule_id AS key, any_value(severity) AS severity, count(*) AS findings,
       (SELECT rounds FROM total) AS rounds
FROM f GROUP BY rule_id
UNION ALL
SELECT 'hour', strftime(h, '%Y-%m-%d %H:00'), NULL, sum(n_f), sum(n_r) FROM (
    SELECT date_trunc('hour', completed_at) AS h, 0 AS n_f, 1 AS n_r FROM r
    UNION ALL
    SELECT date_trunc('hour', observed_at), 1, 0 FROM f
) GROUP BY h
ORDER BY kind, key
