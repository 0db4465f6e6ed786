-- lnk_causes: THE rule that links a consequence to its cause (spliced into rpt_findings.sql and
-- sum_findings_rows.sql by an include marker, as the body of a CTE). Reads two relations
-- the including query defines: lnk_consequences (the findings that may be consequences, revision 0:
-- finding_id, table_id, rule_id, evidence_event_ids) and lnk_candidates (the findings that may be
-- their causes, revision 0 of the whole generation: finding_id, table_id, rule_id, severity,
-- evidence_event_ids). A consequence is shown under its cause and not counted as another incident:
--   * a DT-remedy-overdue follows from the voiding finding whose remedy was skipped: same table,
--     its evidence is that finding's evidence followed by the RoundStarted (rulebook section 8a);
--   * a DT-chain-broken follows from the DT-sequence-gap the same event raised: same table, the
--     same evidence pair (the last event before the gap, the event after it).
-- Grain: the consequence's finding_id (cause_finding_id: the first cause by ID).
SELECT c.finding_id, min(k.finding_id) AS cause_finding_id
FROM (
    SELECT finding_id, table_id, rule_id,
           CASE rule_id WHEN 'DT-remedy-overdue'
                THEN evidence_event_ids[1:len(evidence_event_ids) - 1]
                ELSE evidence_event_ids END AS cause_evidence
    FROM lnk_consequences
    WHERE rule_id IN ('DT-remedy-overdue', 'DT-chain-broken')
) c
JOIN lnk_candidates k ON k.table_id = c.table_id AND k.evidence_event_ids = c.cause_evidence
WHERE (c.rule_id = 'DT-remedy-overdue' AND k.severity = 'voiding' AND k.rule_id <> 'DT-remedy-overdue')
   OR (c.rule_id = 'DT-chain-broken' AND k.rule_id = 'DT-sequence-gap')
GROUP BY c.finding_id
