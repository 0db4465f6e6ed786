-- dim_findings: the latest revision of each finding (grain: finding_id). Upstream: findings.
CREATE OR REPLACE VIEW dim_findings AS
SELECT * EXCLUDE (rn) FROM (
    SELECT f.*, row_number() OVER (PARTITION BY finding_id ORDER BY revision DESC) AS rn
    FROM findings f
) WHERE rn = 1;

-- fct_detections: revision 0 of each finding, i.e. when and where it was detected
-- (grain: finding_id). Upstream: findings.
CREATE OR REPLACE VIEW fct_detections AS
SELECT d.*, l.status AS current_status, l.remedy_delay_seconds AS current_remedy_delay_seconds,
       l.late AS current_late, l.remedy_event_ids AS current_remedy_event_ids
FROM findings d JOIN dim_findings l USING (finding_id)
WHERE d.revision = 0;

-- dim_offsets: the latest committed offset per (consumer, topic, partition). Upstream: offsets.
CREATE OR REPLACE VIEW dim_offsets AS
SELECT consumer, topic, partition, max(next_offset) AS next_offset
FROM offsets GROUP BY ALL;
