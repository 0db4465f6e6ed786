-- rpt_device_faults: device faults in [$start, $end) and what followed them: the finding each
-- raised (shuffler/shoe rules) and its latest status. Grain: fault event. Upstream: events,
-- fct_detections.
SELECT e.occurred_at, e.table_id, e.round_id, e.type,
       e.payload->>'device_id' AS device_id, e.payload->>'fault' AS fault,
       string_agg(DISTINCT d.rule_id || ' (' || d.current_status || ')', ', ') AS followed_by
FROM events e
LEFT JOIN fct_detections d ON d.table_id = e.table_id AND list_contains(d.evidence_event_ids, e.event_id)
WHERE e.type IN ('ShufflerFaulted', 'AutoShoeFaulted')
  AND e.occurred_at >= $start AND e.occurred_at < $end
  AND ($table_id IS NULL OR e.table_id = $table_id)
GROUP BY ALL
ORDER BY e.occurred_at, e.table_id
