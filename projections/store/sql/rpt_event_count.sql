-- rpt_event_count: how many dealing events occurred in [$start, $end). Grain: one row.
-- Upstream: events (a period without any says so instead of reporting a clean period).
SELECT count(*) AS events
FROM events
WHERE occurred_at >= $start AND occurred_at < $end
  AND ($table_id IS NULL OR table_id = $table_id)
