-- NCCL kernels of one rank's export: count, total and mean duration (a kernel that waits for a late
-- peer lasts wait + transfer).
SELECT s.value AS kernel, COUNT(*) AS n, ROUND(SUM(k.end - k.start) / 1e6, 3) AS total_ms,
       ROUND(AVG(k.end - k.start) / 1e3, 1) AS avg_us, ROUND(MIN(k.end - k.start) / 1e3, 1) AS min_us
FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
WHERE s.value LIKE 'ncclDevKernel%' GROUP BY 1 ORDER BY total_ms DESC;
