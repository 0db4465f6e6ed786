-- inc_findings: the incidents read model. One row per finding record detected in [$start, $end)
-- (the generation the session names, else the latest), with
--   * cause_finding_id / incident: a consequence (a DT-remedy-overdue after a skipped remedy, a
--     DT-chain-broken after a sequence gap) names its cause and is not an incident; every other
--     record is one (the definition is rpt_findings.sql's, spliced in below);
--   * status: the rulebook's remedy status (open, remedied, overdue) of the finding's latest revision;
--   * review_status and its details as of the reviews made up to $reviews_until (unreviewed,
--     acknowledged, assigned, disposed, reopened, pending_approval: the kind of the latest review
--     event, but pending_approval while the latest decision is a proposal, whatever acknowledgement or
--     assignment followed it; an approval leaves a finding disposed, a rejection reopened). disposed_by,
--     corrective_action and disposition_note are those of the disposition (or the proposal) in
--     force, approved_by the manager who approved it (four eyes); the same mapping as
--     004_console_views.sql's dim_review_status (a test holds them equal);
--   * review_due_at: detection plus $due_voiding / $due_integrity / $due_procedural hours;
--   * review_late: THE definition of a late review: disposed after its due time, or not disposed
--     by $as_of and $as_of past its due time.
-- Grain: finding_id. Upstream: rpt_findings.sql (fct_detections, rounds), reviews (or an empty
-- relation in a store written before the review tables).
WITH rf AS (
    /*findings*/
), rv AS (
    SELECT finding_id, review_id, type, user_name, reviewed_at, assignee, cause, corrective_action, note
    FROM /*reviews*/
    WHERE reviewed_at <= $reviews_until
), last AS (
    SELECT * FROM rv
    QUALIFY row_number() OVER (PARTITION BY finding_id ORDER BY reviewed_at DESC, review_id DESC) = 1
), dsp AS (  -- the latest disposition or proposal of each finding
    SELECT * FROM rv WHERE type IN ('FindingDisposed', 'FindingDispositionProposed')
    QUALIFY row_number() OVER (PARTITION BY finding_id ORDER BY reviewed_at DESC, review_id DESC) = 1
), decision AS (  -- the latest decision of each finding (a proposal stays pending through acknowledgements and assignments)
    SELECT * FROM rv
    WHERE type IN ('FindingDisposed', 'FindingDispositionProposed', 'FindingApproved', 'FindingRejected',
                   'FindingReopened')
    QUALIFY row_number() OVER (PARTITION BY finding_id ORDER BY reviewed_at DESC, review_id DESC) = 1
), agg AS (
    SELECT finding_id, count(*) AS reviews,
           arg_max(assignee, reviewed_at) FILTER (WHERE type = 'FindingAssigned') AS assignee
    FROM rv GROUP BY finding_id
), m AS (
    SELECT rf.finding_id, rf.rule_id, rf.citation, rf.game, rf.severity, rf.provisional, rf.table_id,
           rf.round_id, rf.status, rf.message, rf.required_remedy, rf.detected_at, rf.evidence_event_ids,
           rf.remedy_event_ids, rf.remedy_delay_seconds, rf.remedied_late, rf.dealer_id,
           rf.cause_finding_id, rf.cause_finding_id IS NULL AS incident,
           CASE WHEN decision.type = 'FindingDispositionProposed' THEN 'pending_approval' ELSE CASE last.type
               WHEN 'FindingAcknowledged' THEN 'acknowledged'
               WHEN 'FindingAssigned' THEN 'assigned'
               WHEN 'FindingDisposed' THEN 'disposed'
               WHEN 'FindingReopened' THEN 'reopened'
               WHEN 'FindingApproved' THEN 'disposed'
               WHEN 'FindingRejected' THEN 'reopened'
               ELSE 'unreviewed'
           END END AS review_status,
           last.user_name AS last_reviewed_by,
           last.reviewed_at AS last_reviewed_at,
           CASE WHEN last.type IN ('FindingDisposed', 'FindingApproved') THEN last.cause END AS cause,
           CASE WHEN last.type IN ('FindingDisposed', 'FindingApproved') THEN last.reviewed_at END AS disposed_at,
           CASE WHEN decision.type = 'FindingDispositionProposed' THEN decision.cause END AS proposed_cause,
           CASE WHEN last.type IN ('FindingDisposed', 'FindingApproved') OR decision.type = 'FindingDispositionProposed'
                THEN dsp.user_name END AS disposed_by,
           CASE WHEN last.type = 'FindingApproved' THEN last.user_name END AS approved_by,
           CASE WHEN last.type IN ('FindingDisposed', 'FindingApproved') OR decision.type = 'FindingDispositionProposed'
                THEN dsp.corrective_action END AS corrective_action,
           CASE WHEN last.type IN ('FindingDisposed', 'FindingApproved') OR decision.type = 'FindingDispositionProposed'
                THEN dsp.note END AS disposition_note,
           agg.assignee,
           coalesce(agg.reviews, 0) AS reviews,
           rf.detected_at + to_microseconds(CAST(3600e6 * CASE rf.severity
               WHEN 'voiding' THEN $due_voiding WHEN 'integrity' THEN $due_integrity
               ELSE $due_procedural END AS BIGINT)) AS review_due_at
    FROM rf
    LEFT JOIN last USING (finding_id)
    LEFT JOIN dsp USING (finding_id)
    LEFT JOIN decision USING (finding_id)
    LEFT JOIN agg USING (finding_id)
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
