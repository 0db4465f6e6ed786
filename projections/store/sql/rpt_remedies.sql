-- rpt_remedies: remedies owed for findings detected in [$start, $end): owed, done, done late (with
-- the delay in seconds), open and overdue. Grain: one row. Upstream: fct_detections.
SELECT
    count(*) AS owed,
    count(*) FILTER (WHERE current_status = 'remedied' AND NOT current_late) AS done_on_time,
    count(*) FILTER (WHERE current_status = 'remedied' AND current_late) AS done_late,
    count(*) FILTER (WHERE current_status = 'open') AS open,
    count(*) FILTER (WHERE current_status = 'overdue') AS overdue,
    round(avg(current_remedy_delay_seconds) FILTER (WHERE current_status = 'remedied'), 1) AS mean_delay_seconds,
    round(max(current_remedy_delay_seconds) FILTER (WHERE current_status = 'remedied'), 1) AS max_delay_seconds,
    round(max(current_remedy_delay_seconds) FILTER (WHERE current_late), 1) AS max_late_delay_seconds
FROM fct_detections
WHERE required_remedy IS NOT NULL AND rule_id <> 'DT-remedy-overdue'
  AND observed_at >= $start AND observed_at < $end
  AND ($table_id IS NULL OR table_id = $table_id)
