-- rpt_rounds: rounds dealt per game and table in the period. Grain: (game, table_id).
-- Upstream: rounds.
SELECT game, table_id, count(*) AS rounds, count(*) FILTER (WHERE voided) AS voided_rounds,
       count(DISTINCT dealer_id) AS dealers
FROM rounds
WHERE completed_at >= $start AND completed_at < $end
  AND ($table_id IS NULL OR table_id = $table_id)
GROUP BY game, table_id
ORDER BY game, table_id
