-- rev_status: THE review status of a finding as of a time, the projection of its review events
-- (spliced into 004_console_views.sql's dim_review_status and inc_findings.sql by an
-- include marker, as the body of a CTE: projections/store/sql_files.py). Reads one relation the including query
-- defines: rev_events, the review events made up to the as-of time (the reader's: the session
-- variable dealtrail_reviews_as_of through reviews_as_of, or the incidents model's $reviews_until).
-- Grain: finding_id, one row per finding with a review (a finding without one is 'unreviewed', with
-- no reviewer and 0 reviews: the including query says so where it joins).
--   * review_status: the kind of the latest review event (unreviewed, acknowledged, assigned,
--     disposed, reopened), but pending_approval while the latest decision is a proposal, whatever
--     acknowledgement or assignment followed it; an approval leaves a finding disposed, a
--     rejection reopened;
--   * cause and disposed_at: those of the disposition in force (none once reopened); proposed_cause
--     that of a pending proposal; disposed_by, corrective_action and disposition_note those of the
--     disposition (or the proposal) in force; approved_by the manager who approved it (four eyes);
--   * a FindingEvidenceAttached (a note or video references attached) is no decision: it is left
--     out here, so it changes no status, reviewer, cause, assignee or approval (issue 47, item 1).
WITH decided AS (
    SELECT * FROM rev_events WHERE type <> 'FindingEvidenceAttached'
), last AS (
    SELECT * FROM decided
    QUALIFY row_number() OVER (PARTITION BY finding_id ORDER BY reviewed_at DESC, review_id DESC) = 1
), dsp AS (  -- the latest disposition or proposal of each finding
    SELECT * FROM decided WHERE type IN ('FindingDisposed', 'FindingDispositionProposed')
    QUALIFY row_number() OVER (PARTITION BY finding_id ORDER BY reviewed_at DESC, review_id DESC) = 1
), decision AS (  -- the latest decision of each finding (a proposal stays pending through acknowledgements and assignments)
    SELECT * FROM decided
    WHERE type IN ('FindingDisposed', 'FindingDispositionProposed', 'FindingApproved', 'FindingRejected',
                   'FindingReopened')
    QUALIFY row_number() OVER (PARTITION BY finding_id ORDER BY reviewed_at DESC, review_id DESC) = 1
), agg AS (
    SELECT finding_id,
           count(*) AS reviews,
           min(reviewed_at) AS first_reviewed_at,
           arg_max(assignee, reviewed_at) FILTER (WHERE type = 'FindingAssigned') AS assignee
    FROM decided GROUP BY finding_id
), in_force AS (
    SELECT last.finding_id, last.type, last.user_name, last.reviewed_at, last.cause,
           decision.type = 'FindingDispositionProposed' AS proposed,
           last.type IN ('FindingDisposed', 'FindingApproved') AS disposed,
           dsp.user_name AS dsp_user_name, dsp.corrective_action AS dsp_corrective_action, dsp.note AS dsp_note,
           decision.cause AS decision_cause
    FROM last
    LEFT JOIN dsp USING (finding_id)
    LEFT JOIN decision USING (finding_id)
)
SELECT i.finding_id,
       CASE WHEN i.proposed THEN 'pending_approval' ELSE CASE i.type
           WHEN 'FindingAcknowledged' THEN 'acknowledged'
           WHEN 'FindingAssigned' THEN 'assigned'
           WHEN 'FindingDisposed' THEN 'disposed'
           WHEN 'FindingReopened' THEN 'reopened'
           WHEN 'FindingApproved' THEN 'disposed'
           WHEN 'FindingRejected' THEN 'reopened'
           ELSE 'unreviewed'
       END END AS review_status,
       i.user_name AS last_reviewed_by,
       i.reviewed_at AS last_reviewed_at,
       CASE WHEN i.disposed THEN i.cause END AS cause,
       CASE WHEN i.disposed THEN i.reviewed_at END AS disposed_at,
       CASE WHEN i.proposed THEN i.decision_cause END AS proposed_cause,
       CASE WHEN i.disposed OR i.proposed THEN i.dsp_user_name END AS disposed_by,
       CASE WHEN i.type = 'FindingApproved' THEN i.user_name END AS approved_by,
       CASE WHEN i.disposed OR i.proposed THEN i.dsp_corrective_action END AS corrective_action,
       CASE WHEN i.disposed OR i.proposed THEN i.dsp_note END AS disposition_note,
       agg.assignee,
       agg.first_reviewed_at,
       agg.reviews
FROM in_force i
JOIN agg USING (finding_id)
