-- Achieved bandwidth of the large elementwise kernels: BYTES is what one kernel must move (e.g.
-- 8 * numel for an fp32 unary op: one read, one write); only kernels longer than MIN_US count.
SELECT s.value AS kernel, COUNT(*) AS n, ROUND(AVG(k.end - k.start) / 1e3, 1) AS avg_us,
       ROUND(BYTES * 1.0 / AVG(k.end - k.start), 1) AS GBps
FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
WHERE (s.value LIKE '%elementwise%' OR s.value LIKE '%pointwise%' OR s.value LIKE 'triton%')
  AND k.end - k.start > MIN_US * 1000
GROUP BY 1 ORDER BY n DESC;
