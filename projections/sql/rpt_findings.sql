-- rpt_findings: one row per finding detected in the period [$start, $end), with its latest status.
-- Grain: finding_id. Upstream: fct_detections (findings).
SELECT finding_id, rule_id, citation, game, severity, provisional, table_id, round_id,
       current_status AS status, message, required_remedy, evidence_event_ids,
       observed_at AS detected_at, current_remedy_event_ids AS remedy_event_ids,
       current_remedy_delay_seconds AS remedy_delay_seconds, current_late AS remedied_late
FROM fct_detections
WHERE observed_at >= $start AND observed_at < $end
  AND ($table_id IS NULL OR table_id = $table_id)
ORDER BY observed_at, table_id, rule_id, finding_id
