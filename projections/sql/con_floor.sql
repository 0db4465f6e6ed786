-- con_floor: the floor, one row per table that has events: game, the dealer of its latest round,
-- rounds dealt, the last event and its dealing devices' state. Grain: table_id. Upstream: events,
-- rounds. Its incident counts come from the incidents read model (projections/incidents.py).
WITH t AS (
    SELECT table_id, any_value(game) AS game, max(occurred_at) AS last_event_at FROM events GROUP BY table_id
), r AS (
    SELECT table_id, count(*) AS rounds, arg_max(dealer_id, completed_at) AS dealer_id,
           max(completed_at) AS last_round_at
    FROM rounds GROUP BY table_id
), dev AS (
    -- A device is out of service from DeviceTakenOutOfService to DeviceReturnedToService. It is
    -- faulted from ShufflerFaulted / AutoShoeFaulted, or a completed shuffle in another mode or
    -- short of cards, until a good completed shuffle (mode SHUFFLE, the device not reporting a
    -- short deck) or its return to service, as the engine clears a fault (rulebook 10.1.2; its
    -- further conditions, the faulted deck and a shuffle started after the fault, are not
    -- checked here). Cards taken out of a jammed device leave it faulted, since the fault.
    SELECT table_id,
           count(*) FILTER (WHERE kind NOT LIKE 'ShuffleCompleted%') > 0 AS has_device,
           arg_max(kind, seq) FILTER (WHERE kind LIKE 'Device%Service') AS service_event,
           arg_max(occurred_at, seq) FILTER (WHERE kind LIKE 'Device%Service') AS service_since,
           arg_max(kind, seq) FILTER (WHERE kind <> 'DeviceTakenOutOfService') AS fault_event,
           arg_max(occurred_at, seq) FILTER (WHERE kind <> 'DeviceTakenOutOfService') AS fault_since
    FROM (
        SELECT table_id, seq, occurred_at,
               CASE WHEN type <> 'ShuffleCompleted' THEN type
                    WHEN coalesce(payload->>'mode', 'SHUFFLE') = 'SHUFFLE'
                         AND coalesce(payload->>'device_full_deck_ok', 'true') <> 'false' THEN 'ShuffleCompletedGood'
                    ELSE 'ShuffleCompletedBad'
               END AS kind
        FROM events
        WHERE type IN ('DeviceRegistered', 'ShufflerFaulted', 'AutoShoeFaulted', 'ShuffleCompleted',
                       'DeviceTakenOutOfService', 'DeviceReturnedToService')
    )
    GROUP BY table_id
)
SELECT t.table_id, t.game, r.dealer_id, coalesce(r.rounds, 0) AS rounds, t.last_event_at,
       CASE WHEN NOT coalesce(dev.has_device, false) THEN 'no device'
            WHEN dev.service_event = 'DeviceTakenOutOfService' THEN 'out of service'
            WHEN dev.fault_event IN ('ShufflerFaulted', 'AutoShoeFaulted', 'ShuffleCompletedBad') THEN 'faulted'
            ELSE 'in service'
       END AS device_state,
       CASE WHEN dev.service_event = 'DeviceTakenOutOfService' THEN dev.service_since
            ELSE dev.fault_since
       END AS device_since
FROM t LEFT JOIN r USING (table_id) LEFT JOIN dev USING (table_id)
ORDER BY t.game, t.table_id
