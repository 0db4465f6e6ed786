-- con_floor: the floor, one row per table that has events: game, the dealer of its latest round,
-- rounds dealt, the last event, its dealing devices' state and its findings not yet disposed by
-- severity. Grain: table_id. Upstream: events, rounds, dim_findings, dim_review_status.
WITH t AS (
    SELECT table_id, any_value(game) AS game, max(occurred_at) AS last_event_at FROM events GROUP BY table_id
), r AS (
    SELECT table_id, count(*) AS rounds, arg_max(dealer_id, completed_at) AS dealer_id,
           max(completed_at) AS last_round_at
    FROM rounds GROUP BY table_id
), dev AS (
    -- the latest device event of the table says its state
    SELECT table_id, arg_max(type, seq) AS device_event, max(occurred_at) AS device_since
    FROM events
    WHERE type IN ('DeviceRegistered', 'ShufflerFaulted', 'AutoShoeFaulted', 'CardsRemovedFromDevice',
                   'DeviceTakenOutOfService', 'DeviceReturnedToService')
    GROUP BY table_id
), f AS (
    SELECT d.table_id,
           count(*) FILTER (WHERE d.severity = 'voiding') AS open_voiding,
           count(*) FILTER (WHERE d.severity = 'integrity') AS open_integrity,
           count(*) FILTER (WHERE d.severity = 'procedural') AS open_procedural,
           count(*) FILTER (WHERE d.status = 'overdue') AS remedies_overdue,
           max(d.observed_at) AS last_finding_at
    FROM dim_findings d JOIN dim_review_status s USING (finding_id)
    WHERE s.review_status <> 'disposed'
    GROUP BY d.table_id
)
SELECT t.table_id, t.game, r.dealer_id, coalesce(r.rounds, 0) AS rounds, t.last_event_at,
       CASE dev.device_event
           WHEN 'ShufflerFaulted' THEN 'faulted'
           WHEN 'AutoShoeFaulted' THEN 'faulted'
           WHEN 'CardsRemovedFromDevice' THEN 'faulted'
           WHEN 'DeviceTakenOutOfService' THEN 'out of service'
           WHEN 'DeviceReturnedToService' THEN 'in service'
           WHEN 'DeviceRegistered' THEN 'in service'
           ELSE 'no device'
       END AS device_state,
       dev.device_since,
       coalesce(f.open_voiding, 0) AS open_voiding,
       coalesce(f.open_integrity, 0) AS open_integrity,
       coalesce(f.open_procedural, 0) AS open_procedural,
       coalesce(f.remedies_overdue, 0) AS remedies_overdue,
       f.last_finding_at
FROM t LEFT JOIN r USING (table_id) LEFT JOIN dev USING (table_id) LEFT JOIN f USING (table_id)
ORDER BY t.game, t.table_id
