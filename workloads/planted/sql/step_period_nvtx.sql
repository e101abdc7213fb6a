-- GPU step period from NVTX step_N ranges: every kernel launched (runtime call on the same thread)
-- inside step_N belongs to step N; period = start of step N+1's first kernel - start of step N's.
-- Works when the CPU runs ahead (ranges short) and for CUDA-graph launches (kernels carry the
-- graph launch's correlation id). Take the median of period_ms over steps >= warm-up.
WITH st AS (
  SELECT CAST(substr(COALESCE(n.text, s.value), 6) AS INTEGER) AS step, n.start, n.end, n.globalTid
  FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
  WHERE n.eventType = 59 AND COALESCE(n.text, s.value) GLOB 'step_[0-9]*'),
kk AS (
  SELECT st.step, MIN(k.start) AS first_start, MAX(k.end) AS last_end, SUM(k.end - k.start) AS busy, COUNT(*) AS kernels
  FROM st
  JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.globalTid = st.globalTid AND r.start >= st.start AND r.start < st.end
  JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId
  GROUP BY st.step)
SELECT step, kernels,
       ROUND((LEAD(first_start) OVER (ORDER BY step) - first_start) / 1e6, 3) AS period_ms,
       ROUND(busy / 1e6, 3) AS kernel_ms
FROM kk ORDER BY step;
