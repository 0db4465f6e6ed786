-- rpt_findings: one row per finding detected in the period [$start, $end), with its latest status,
-- the dealer of its round and, for a consequence, the finding it follows from (cause_finding_id;
-- NULL for an incident). Grain: finding_id. Upstream: fct_detections (findings), rounds.
-- A consequence is shown under its cause and not counted as another incident:
--   * a DT-remedy-overdue follows from the voiding finding whose remedy was skipped: same table,
--     its evidence is that finding's evidence followed by the RoundStarted (rulebook section 8a);
--   * a DT-chain-broken follows from the DT-sequence-gap the same event raised: same table, the
--     same evidence pair (the last event before the gap, the event after it).
-- The cause is looked for in the whole generation, not only the period: a consequence of an
-- incident reported in an earlier period is not a new incident of this one.
WITH consequence AS (
    SELECT finding_id, table_id, rule_id,
           CASE rule_id WHEN 'DT-remedy-overdue'
                THEN evidence_event_ids[1:len(evidence_event_ids) - 1]
                ELSE evidence_event_ids END AS cause_evidence
    FROM fct_detections
    WHERE rule_id IN ('DT-remedy-overdue', 'DT-chain-broken')
      AND observed_at >= $start AND observed_at < $end
      AND ($table_id IS NULL OR table_id = $table_id)
), causes AS (
    SELECT c.finding_id, min(k.finding_id) AS cause_finding_id
    FROM consequence c
    JOIN fct_detections k ON k.table_id = c.table_id AND k.evidence_event_ids = c.cause_evidence
    WHERE (c.rule_id = 'DT-remedy-overdue' AND k.severity = 'voiding' AND k.rule_id <> 'DT-remedy-overdue')
       OR (c.rule_id = 'DT-chain-broken' AND k.rule_id = 'DT-sequence-gap')
    GROUP BY c.finding_id
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
