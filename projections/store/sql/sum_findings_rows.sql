-- sum_findings_rows: the rows of sum_findings for generation $g and the findings named in the
-- relation sum_touched (finding_id): rpt_findings.sql's columns, computed from the findings table
-- itself (revision 0 for where and when, the latest revision for the remedy status), the rounds
-- (the dealer) and, for a consequence, its cause looked for in the whole generation of its table,
-- by the rule of lnk_causes.sql (spliced in below), as rpt_findings.sql does. Grain: finding_id. Upstream: findings, rounds.
WITH f AS (
    SELECT * FROM findings WHERE generation = $g AND finding_id IN (SELECT finding_id FROM sum_touched)
), d AS (
    SELECT * FROM f WHERE revision = 0
), l AS (
    SELECT finding_id, status, remedy_event_ids, remedy_delay_seconds, late FROM f
    QUALIFY row_number() OVER (PARTITION BY finding_id ORDER BY revision DESC) = 1
), lnk_consequences AS (
    SELECT * FROM d
), lnk_candidates AS (
    SELECT * FROM findings WHERE generation = $g AND revision = 0
), causes AS (
    /*include:lnk_causes.sql*/
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
