-- Copies by direction and host memory kind (copyKind 1 HtoD, 2 DtoH, 8 DtoD; kind 0 pageable,
-- 1 pinned, 2 device): count, size, duration, rate.
SELECT copyKind, srcKind, dstKind, COUNT(*) AS n, ROUND(AVG(bytes) / 1e6, 2) AS avg_MB,
       ROUND(AVG(end - start) / 1e6, 3) AS avg_ms, ROUND(SUM(bytes) * 1.0 / SUM(end - start), 2) AS GBps
FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
