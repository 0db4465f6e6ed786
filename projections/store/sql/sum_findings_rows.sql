-- sum_findings_rows: the rows of sum_findings for generation $g and the findings named in the
-- relation sum_touched (finding_id): rpt_findings.sql's columns, computed from the findings table
-- itself (revision 0 for where and when, the latest revision for the remedy status), the rounds
-- (the dealer) and, for a consequence, its cause looked for in the whole generation of its table,
-- as rpt_findings.sql does. Grain: finding_id. Upstream: findings, rounds.
WITH f AS (
    SELECT * FROM findings WHERE generation = $g AND finding_id IN (SELECT finding_id FROM sum_touched)
), d AS (
    SELECT * FROM f WHERE revision = 0
), l AS (
    SELECT finding_id, status, remedy_event_ids, remedy_delay_seconds, late FROM f
    QUALIFY row_number() OVER (PARTITION BY finding_id ORDER BY revision DESC) = 1
), consequence AS (
    SELECT finding_id, table_id, rule_id,
           CASE rule_id WHEN 'DT-remedy-overdue'
                THEN evidence_event_ids[1:len(evidence_event_ids) - 1]
                ELSE evidence_event_ids END AS cause_evidence
    FROM d
    WHERE rule_id IN ('DT-remedy-overdue', 'DT-chain-broken')
), causes AS (
    SELECT c.finding_id, min(k.finding_id) AS cause_finding_id
    FROM consequence c
    JOIN findings k ON k.generation = $g AND k.revision = 0 AND k.table_id = c.table_id
                   AND k.evidence_event_ids = c.cause_evidence
    WHERE (c.rule_id = 'DT-remedy-overdue' AND k.severity = 'voiding' AND k.rule_id <> 'DT-remedy-overdue')
       OR (c.rule_id = 'DT-chain-broken' AND k.rule_id = 'DT-sequence-gap')
    GROUP BY c.finding_id
), r AS (
    SELECT table_id, round_id, dealer_id FROM rounds WHERE round_id IN (SELECT round_id FROM d)
)
SELECT $g AS generation, d.finding_id, d.rule_id, d.citation, d.game, d.severity, d.provisional, d.table_id,
       d.round_id, l.status, d.message, d.required_remedy, d.evidence_event_ids, d.observed_at AS detected_at,
       l.remedy_event_ids, l.remedy_delay_seconds, l.late AS remedied_late, r.dealer_id, c.cause_finding_id
FROM d
JOIN l USING (finding_id)
LEFT JOIN causes c USING (finding_id)
LEFT JOIN r ON r.table_id = d.table_id AND r.round_id = d.round_id
