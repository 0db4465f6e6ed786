-- rpt_control_judge: the judging half of a control chart, after a CTE named `points` with the
-- columns subject_id, slot_start (TIMESTAMP, the slot's local start), slot_start_utc (TIMESTAMPTZ),
-- rounds, voiding, procedural, integrity (one row per subject and slot). Included after
-- `WITH points AS (...),` by rpt_control_chart.sql (the store's dealers and tables) and
-- rpt_control_given.sql (points given by the caller: a group's properties). Parameters:
-- $category, $min_rounds, $u_bar, $sigma_z, $cusum_k, $cusum_h, $subject; the formulas are in
-- rpt_control_chart.sql's header.
p AS (
    SELECT subject_id, slot_start, slot_start_utc, rounds, voiding, procedural, integrity,
           CASE $category WHEN 'voiding' THEN voiding WHEN 'procedural' THEN procedural
                          WHEN 'integrity' THEN integrity ELSE voiding + procedural + integrity END AS errors,
           rounds / 1000.0 AS n,
           rounds >= $min_rounds AS solid
    FROM points
), centre AS (
    SELECT coalesce($u_bar::DOUBLE, sum(errors) FILTER (WHERE solid) / nullif(sum(n) FILTER (WHERE solid), 0)) AS u_bar
    FROM p
), z AS (
    SELECT p.*, errors / n AS u, c.u_bar,
           CASE WHEN c.u_bar > 0 THEN (errors / n - c.u_bar) / sqrt(c.u_bar / n) END AS z
    FROM p, centre c
), solid AS (  -- the points the rules read, numbered within their subject
    SELECT *, row_number() OVER w AS k,
           abs(z - lag(z) OVER w) AS mr,
           errors - $cusum_k::DOUBLE * u_bar * n AS step
    FROM z WHERE solid
    WINDOW w AS (PARTITION BY subject_id ORDER BY slot_start)
), spread AS (
    SELECT coalesce($sigma_z::DOUBLE, avg(mr) / 1.128) AS sigma_z FROM solid
), runs AS (
    SELECT s.subject_id, s.slot_start, s.mr,
           sum(s.step) OVER w AS c_run,
           min(sum_step_to) OVER w AS c_min,
           min(CASE WHEN s.u > s.u_bar THEN 1 ELSE 0 END) OVER w8 = 1 AND count(*) OVER w8 = 8 AS run8,
           min(CASE WHEN s.u < s.u_bar THEN 1 ELSE 0 END) OVER w8 = 1 AND count(*) OVER w8 = 8 AS below_run8,
           min(CASE WHEN s.u > s.u_prev THEN 1 ELSE 0 END) OVER w5 = 1 AND count(s.u_prev) OVER w5 = 5 AS rising6
    FROM (SELECT *, lag(u) OVER (PARTITION BY subject_id ORDER BY slot_start) AS u_prev,
                 sum(step) OVER (PARTITION BY subject_id ORDER BY slot_start) AS sum_step_to
          FROM solid) s
    WINDOW w AS (PARTITION BY s.subject_id ORDER BY s.slot_start),
           w8 AS (PARTITION BY s.subject_id ORDER BY s.slot_start ROWS BETWEEN 7 PRECEDING AND CURRENT ROW),
           w5 AS (PARTITION BY s.subject_id ORDER BY s.slot_start ROWS BETWEEN 4 PRECEDING AND CURRENT ROW)
), cusum AS (
    SELECT subject_id, slot_start, run8, below_run8, rising6, mr,
           c_run - least(0, c_min) AS cusum
    FROM runs
), judged AS (
    SELECT z.*, sp.sigma_z, cu.cusum, cu.mr,
           coalesce(cu.run8, false) AS run8, coalesce(cu.below_run8, false) AS below_run8,
           coalesce(cu.rising6, false) AS rising6,
           z.u_bar + 3 * sqrt(z.u_bar / z.n) AS ucl_u,
           greatest(0, z.u_bar - 3 * sqrt(z.u_bar / z.n)) AS lcl_u,
           z.u_bar + 3 * sp.sigma_z * sqrt(z.u_bar / z.n) AS ucl,
           greatest(0, z.u_bar - 3 * sp.sigma_z * sqrt(z.u_bar / z.n)) AS lcl,
           coalesce(cu.cusum > $cusum_h::DOUBLE
                    AND coalesce(lag(cu.cusum) OVER (PARTITION BY z.subject_id, z.solid ORDER BY z.slot_start), 0)
                        <= $cusum_h::DOUBLE, false) AS cusum_signal
    FROM z CROSS JOIN spread sp
    LEFT JOIN cusum cu ON cu.subject_id = z.subject_id AND cu.slot_start = z.slot_start
)
SELECT subject_id, slot_start, slot_start_utc, rounds, voiding, procedural, integrity, errors, solid,
       u, u_bar, sigma_z, z, mr, ucl_u, lcl_u, ucl, lcl, cusum,
       solid AND coalesce(u > ucl, false) AS beyond, solid AND coalesce(lcl > 0 AND u < lcl, false) AS beyond_below,
       solid AND run8 AS run8, solid AND below_run8 AS below_run8, solid AND rising6 AS rising6,
       solid AND cusum_signal AS cusum_signal,
       solid AND (coalesce(u > ucl, false) OR run8 OR rising6 OR cusum_signal) AS signal
FROM judged
WHERE $subject IS NULL OR subject_id = $subject
ORDER BY subject_id, slot_start
