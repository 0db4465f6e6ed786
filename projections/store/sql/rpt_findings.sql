-- rpt_findings: one row per finding detected in the period [$start, $end), with its latest status,
-- the dealer of its round and, for a consequence, the finding it follows from (cause_finding_id;
-- NULL for an incident). Grain: finding_id. Upstream: fct_detections (findings), rounds.
-- A consequence is shown under its cause and not counted as another incident: the rule is
-- lnk_causes.sql's, spliced in below (sum_findings_rows.sql splices the same file).
-- The cause is looked for in the whole generation, not only the period: a consequence of an
-- incident reported in an earlier period is not a new incident of this one.
WITH lnk_consequences AS (
    SELECT * FROM fct_detections
    WHERE observed_at >= $start AND observed_at < $end
      AND ($table_id IS NULL OR table_id = $table_id)
), lnk_candidates AS (
    SELECT * FROM fct_detections
), causes AS (
    /*include:lnk_causes.sql*/
)
SELECT d.finding_id, d.rule_id, d.citation, d.game, d.severity, d.provisional, d.table_id, d.round_id,
       d.current_status AS status, d.message, d.required_remedy, d.evidence_event_ids,
       d.observed_at AS detected_at, d.current_remedy_event_ids AS remedy_event_ids,
       d.current_remedy_delay_seconds AS remedy_delay_seconds, d.current_late AS remedied_late,
       r.dealer_id, c.cause_finding_id
FROM fct_detections d
LEFT JOIN causes c USING (finding_id)
LEFT JOIN rounds r ON r.table_id = d.table_id AND r.round_id = d.round_id
WHERE d.observed_at >= $start AND d.observed_at < $end
  AND ($table_id IS NULL OR d.table_id = $table_id)
ORDER BY d.observed_at, d.table_id, d.rule_id, d.finding_id
