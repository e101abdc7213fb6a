-- GPU idle between consecutive kernels of one device, split by whether the next kernel's launch call (the
-- runtime API call with its correlationId: cudaLaunchKernel, or cudaGraphLaunch for graph nodes) ended after
-- the previous kernel had ended (launch-starved: the GPU waited for the host to issue it) or before (any other
-- idle: a sync, a copy, a dependency). Kernels starting in [T0, T1) (ns; from step_period_nvtx.sql or
-- step_period_anchor.sql's anchors); divide by the steps in the window for per-step figures. Assumes one
-- compute stream (overlapping kernels make the gaps approximate).
WITH k AS (
  SELECT k.start, k.end, k.correlationId,
         LAG(k.end) OVER (PARTITION BY k.deviceId ORDER BY k.start) AS prev_end
  FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE k.start >= T0 AND k.start < T1)
SELECT COUNT(*) AS kernels,
       ROUND(SUM(k.end - k.start) / 1e6, 3) AS kernel_ms,
       ROUND(SUM(CASE WHEN k.start > k.prev_end AND r.end > k.prev_end THEN k.start - k.prev_end ELSE 0 END) / 1e6, 3)
         AS launch_starved_idle_ms,
       ROUND(SUM(CASE WHEN k.start > k.prev_end AND r.end <= k.prev_end THEN k.start - k.prev_end ELSE 0 END) / 1e6, 3)
         AS other_idle_ms
FROM k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
WHERE k.prev_end IS NOT NULL;
