-- sum_floor_merge: the new sum_floor rows of the tables a batch touched. Grain: table_id.
-- Upstream: sum_floor (the rows so far) and two relations the writer registers:
--   floor_new_events (projections.store.summaries.FLOOR_EVENT_COLUMNS): the events the batch inserted
--     (a superset of stored events gives the same result: every figure is a latest or a max);
--   floor_round_delta (table_id, game, dealer_id, completed_at): the rounds the batch inserted.
-- Idempotent: each figure is merged with the stored row by seq and time (the latest wins), so a
-- replayed batch changes nothing and a late event with an older seq does not undo a later state;
-- rounds are added by count, and only rounds that were actually inserted arrive here.
-- Devices are not here: the floor takes their state from the engine's (projections/models/device_state.py).
WITH ea AS (
    SELECT table_id, any_value(game) AS game, max(occurred_at) AS last_event_at, max(seq) AS last_seq,
           arg_max(actor_id, seq) FILTER (WHERE actor_role = 'FLOOR') AS supervisor_id,
           max(seq) FILTER (WHERE actor_role = 'FLOOR') AS supervisor_seq
    FROM floor_new_events GROUP BY table_id
), ra AS (
    SELECT table_id, any_value(game) AS game, count(*) AS rounds,
           arg_max(dealer_id, completed_at) AS dealer_id, max(completed_at) AS last_round_at
    FROM floor_round_delta GROUP BY table_id
), k AS (
    SELECT table_id FROM ea UNION SELECT table_id FROM ra
), o AS (
    SELECT * FROM sum_floor WHERE table_id IN (SELECT table_id FROM k)
)
SELECT k.table_id,
       coalesce(o.game, ea.game, ra.game) AS game,
       greatest(o.last_event_at, ea.last_event_at) AS last_event_at,
       greatest(o.last_seq, ea.last_seq) AS last_seq,
       CASE WHEN ea.supervisor_seq >= o.supervisor_seq OR o.supervisor_seq IS NULL
            THEN ea.supervisor_id ELSE o.supervisor_id END AS supervisor_id,
       greatest(o.supervisor_seq, ea.supervisor_seq) AS supervisor_seq,
       coalesce(o.rounds, 0) + coalesce(ra.rounds, 0) AS rounds,
       CASE WHEN ra.last_round_at >= o.last_round_at OR o.last_round_at IS NULL
            THEN coalesce(ra.dealer_id, o.dealer_id) ELSE o.dealer_id END AS dealer_id,
       greatest(o.last_round_at, ra.last_round_at) AS last_round_at
FROM k LEFT JOIN o USING (table_id) LEFT JOIN ea USING (table_id) LEFT JOIN ra USING (table_id)
