-- One device's timeline split into: NCCL-only (NCCL kernels run, nothing else), compute (any other
-- kernel), idle (no kernel at all), between the first kernel at or after T0 and the last end before
-- T1 (ns, from step_period_nvtx.sql: T0 = first_start of the first steady step, T1 = first_start of
-- the step after the last one counted). Copies are not kernels: a copy-only stretch counts as idle.
WITH k AS (
  SELECT k.start, k.end, CASE WHEN s.value LIKE 'nccl%' THEN 1 ELSE 0 END AS nccl
  FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
  WHERE k.start >= T0 AND k.end <= T1),
ev AS (SELECT start AS t, nccl, 1 AS d FROM k UNION ALL SELECT end, nccl, -1 FROM k),
run AS (
  SELECT t, LEAD(t) OVER (ORDER BY t, d) AS t_next,
         SUM(CASE WHEN nccl = 1 THEN d ELSE 0 END) OVER (ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS n_nccl,
         SUM(CASE WHEN nccl = 0 THEN d ELSE 0 END) OVER (ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS n_other
  FROM ev)
SELECT ROUND(SUM(CASE WHEN n_nccl > 0 AND n_other = 0 THEN t_next - t ELSE 0 END) / 1e6, 3) AS nccl_only_ms,
       ROUND(SUM(CASE WHEN n_other > 0 THEN t_next - t ELSE 0 END) / 1e6, 3) AS compute_ms,
       ROUND(SUM(CASE WHEN n_nccl = 0 AND n_other = 0 THEN t_next - t ELSE 0 END) / 1e6, 3) AS idle_ms
FROM run WHERE t_next IS NOT NULL;
