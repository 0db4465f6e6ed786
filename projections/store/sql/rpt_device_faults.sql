-- rpt_device_faults: device faults in [$start, $end) and what followed them: the finding each
-- raised (shuffler/shoe rules) and its latest status. Grain: fault event. Upstream: events (live and archived),
-- fct_detections.
-- The findings are matched on the fault's event ID among their evidence (unnested, an equality
-- join: a month holds thousands of faults and tens of thousands of findings).
-- The faults are found on narrow columns first and their payloads read by row ID: the payload
-- column is compressed in large blocks, and filtering on the type alone decompressed every one.
-- {live_events} is the store's own table (row IDs work on it), {archived_events} the months
-- `dealtrail archive` moved to Parquet (an empty relation without an archive; a plain filter:
-- Parquet has no row IDs). projections.store.archive.event_sources names both.
WITH picked AS (
    SELECT rowid AS rid FROM {live_events}
    WHERE type IN ('ShufflerFaulted', 'AutoShoeFaulted')
      AND occurred_at >= $start AND occurred_at < $end
      AND ($table_id IS NULL OR table_id = $table_id)
), faults AS (
    SELECT e.event_id, e.occurred_at, e.table_id, e.round_id, e.type,
           e.payload->>'device_id' AS device_id, e.payload->>'fault' AS fault
    FROM {live_events} e
    WHERE e.rowid IN (SELECT rid FROM picked)
    UNION ALL
    SELECT e.event_id, e.occurred_at, e.table_id, e.round_id, e.type,
           e.payload->>'device_id' AS device_id, e.payload->>'fault' AS fault
    FROM {archived_events} e
    WHERE e.type IN ('ShufflerFaulted', 'AutoShoeFaulted')
      AND e.occurred_at >= $start AND e.occurred_at < $end
      AND ($table_id IS NULL OR e.table_id = $table_id)
), cited AS (
    SELECT d.table_id, unnest(d.evidence_event_ids) AS event_id, d.rule_id, d.current_status
    FROM fct_detections d
    WHERE d.table_id IN (SELECT table_id FROM faults)
)
SELECT f.occurred_at, f.table_id, f.round_id, f.type, f.device_id, f.fault,
       string_agg(DISTINCT c.rule_id || ' (' || c.current_status || ')', ', '
                  ORDER BY c.rule_id || ' (' || c.current_status || ')') AS followed_by
FROM faults f
LEFT JOIN cited c ON c.table_id = f.table_id AND c.event_id = f.event_id
GROUP BY f.occurred_at, f.table_id, f.round_id, f.type, f.device_id, f.fault
ORDER BY f.occurred_at, f.table_id
