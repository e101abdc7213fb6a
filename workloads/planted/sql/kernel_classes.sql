-- Kernel time by name (whole capture); divide by the step count for per-step figures.
SELECT s.value AS kernel, COUNT(*) AS n, ROUND(SUM(k.end - k.start) / 1e6, 3) AS total_ms,
       ROUND(AVG(k.end - k.start) / 1e3, 2) AS avg_us, MAX(k.gridX * k.gridY * k.gridZ) AS max_grid
FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
GROUP BY 1 ORDER BY total_ms DESC LIMIT 25;
