-- inc_findings: the incidents read model. One row per finding record detected in [$start, $end)
-- (the generation the session names, else the latest), with
--   * cause_finding_id / incident: a consequence (a DT-remedy-overdue after a skipped remedy, a
--     DT-chain-broken after a sequence gap) names its cause and is not an incident; every other
--     record is one (the definition is rpt_findings.sql's, spliced in below);
--   * status: the rulebook's remedy status (open, remedied, overdue) of the finding's latest revision;
--   * review_status and its details as of the reviews made up to $reviews_until: rev_status.sql's
--     definition, spliced in below (004_console_views.sql's dim_review_status splices the same file);
--   * review_due_at: detection plus $due_voiding / $due_integrity / $due_procedural hours;
--   * review_late: THE definition of a late review: disposed after its due time, or not disposed
--     by $as_of and $as_of past its due time.
-- Grain: finding_id. Upstream: rpt_findings.sql (fct_detections, rounds), reviews (or an empty
-- relation in a store written before the review tables).
WITH rf AS (
    /*findings*/
), rev_events AS (
    SELECT finding_id, review_id, type, user_name, reviewed_at, assignee, cause, corrective_action, note
    FROM /*reviews*/
    WHERE reviewed_at <= $reviews_until
), s AS (
    /*include:rev_status.sql*/
), m AS (
    SELECT rf.finding_id, rf.rule_id, rf.citation, rf.game, rf.severity, rf.provisional, rf.table_id,
           rf.round_id, rf.status, rf.message, rf.required_remedy, rf.detected_at, rf.evidence_event_ids,
           rf.remedy_event_ids, rf.remedy_delay_seconds, rf.remedied_late, rf.dealer_id,
           rf.cause_finding_id, rf.cause_finding_id IS NULL AS incident,
           coalesce(s.review_status, 'unreviewed') AS review_status,
           s.last_reviewed_by, s.last_reviewed_at, s.cause, s.disposed_at, s.proposed_cause, s.disposed_by,
           s.approved_by, s.corrective_action, s.disposition_note, s.assignee,
           coalesce(s.reviews, 0) AS reviews,
           rf.detected_at + to_microseconds(CAST(3600e6 * CASE rf.severity
               WHEN 'voiding' THEN $due_voiding WHEN 'integrity' THEN $due_integrity
               ELSE $due_procedural END AS BIGINT)) AS review_due_at
    FROM rf
    LEFT JOIN s USING (finding_id)
    WHERE ($finding_id IS NULL OR rf.finding_id = $finding_id)
)
SELECT *, coalesce(disposed_at, $as_of) > review_due_at AS review_late
FROM m
WHERE ($game IS NULL OR game = $game)
  AND ($dealer IS NULL OR dealer_id = $dealer)
  AND ($rule IS NULL OR rule_id = $rule)
  AND ($severity IS NULL OR severity = $severity)
  AND ($status IS NULL OR status = $status)
  AND ($review_status IS NULL OR review_status = $review_status)
  AND ($incident IS NULL OR incident = $incident)
  AND ($assignee IS NULL OR assignee = $assignee)
  AND ($not_disposed IS NULL OR (review_status <> 'disposed') = $not_disposed)
  AND ($case_of IS NULL OR finding_id = $case_of OR cause_finding_id = $case_of)
  AND ($ids::VARCHAR[] IS NULL OR finding_id IN (SELECT unnest($ids::VARCHAR[])))
