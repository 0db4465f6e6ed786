-- rpt_span: the first and last dealing event in [$start, $end) (the real period a report covers
-- when it is unbounded). Grain: one row (NULLs when the period holds no event). Upstream: events.
SELECT min(occurred_at) AS first_event, max(occurred_at) AS last_event
FROM events
WHERE occurred_at >= $start AND occurred_at < $end
  AND ($table_id IS NULL OR table_id = $table_id)
