-- rpt_control_chart: a control chart per subject (dealer or table) over the points of
-- rpt_control_points.sql (issue 50). Grain: (subject_id, slot_start). Upstream: rounds, sum_findings.
-- The process is the floor: the centre line u_bar (incidents per 1,000 rounds) and Laney's sigma_z
-- are pooled over every subject of the kind in the period, or taken from a frozen baseline
-- ($u_bar, $sigma_z; NULL: computed here). $category: 'all' or one severity ('voiding',
-- 'procedural', 'integrity'). n_i = rounds / 1000. A point with fewer than $min_rounds rounds is
-- hollow: shown, but left out of u_bar, sigma_z, the run rules and the CUSUM, and never a signal.
--   u-chart limits:  u_bar +- 3 sqrt(u_bar / n_i)                       (lower floored at 0)
--   Laney u':        z_i = (u_i - u_bar) / sqrt(u_bar / n_i); sigma_z = mean |z_i - z_(i-1)| / 1.128
--                    (moving ranges within each subject, in time order); limits
--                    u_bar +- 3 sigma_z sqrt(u_bar / n_i)                (lower floored at 0)
-- Signals (judged on the Laney limits, a rise only: a signal asks for a look at a worse rate):
--   beyond   the point is above its upper limit;
--   run8     the point ends 8 solid points in a row above the centre line;
--   rising6  the point ends 6 solid points in a row each higher than the one before;
--   cusum    the subject's Poisson CUSUM S_i = max(0, S_(i-1) + c_i - $cusum_k * u_bar * n_i) first
--            exceeds $cusum_h (a crossing: S_(i-1) <= h < S_i), computed without a reset as
--            C_i - min(0, min_(j<=i) C_j) where C is the running sum of the increments.
-- The rule columns for the other side (below_run8, beyond_below) are shown, never signals. Without
-- an incident or two solid points of one subject in a row there is no centre line or no spread:
-- the limits are NULL and no point is beyond them.
WITH points AS (
    /*include:rpt_control_points.sql*/
), /*include:rpt_control_judge.sql*/
