-- rpt_by_dealer: rounds dealt and findings per dealer in [$start, $end). Grain: dealer_id.
-- Upstream: rounds (who dealt each round), fct_detections (findings of those rounds). Findings
-- counted are incidents: $consequences lists the findings shown under their cause (rpt_findings).
WITH r AS (
    SELECT * FROM rounds
    WHERE completed_at >= $start AND completed_at < $end AND ($table_id IS NULL OR table_id = $table_id)
), f AS (
    SELECT d.round_id, d.table_id, d.severity FROM fct_detections d
    WHERE d.observed_at >= $start AND d.observed_at < $end AND ($table_id IS NULL OR d.table_id = $table_id)
      AND d.finding_id NOT IN (SELECT unnest(CAST($consequences AS VARCHAR[])))
)
SELECT r.dealer_id,
       count(DISTINCT (r.table_id, r.round_id)) AS rounds,
       count(f.round_id) AS findings,
       count(f.round_id) FILTER (WHERE f.severity = 'voiding') AS voiding,
       count(f.round_id) FILTER (WHERE f.severity = 'integrity') AS integrity,
       count(f.round_id) FILTER (WHERE f.severity = 'procedural') AS procedural
FROM r LEFT JOIN f ON f.table_id = r.table_id AND f.round_id = r.round_id
GROUP BY r.dealer_id
ORDER BY findings DESC, r.dealer_id
