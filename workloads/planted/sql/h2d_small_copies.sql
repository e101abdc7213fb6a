-- Host-to-device copies under 1 MB: how many, how big, how long the DMA took, and the GPU-side gap from
-- the end of one to the start of the next (per-copy host overhead when they are issued back to back).
-- Divide n by the step count for copies per step; copies per step x (avg_gap + avg_dma) is the time the
-- step spends in them when nothing else runs.
WITH m AS (
  SELECT start, end, bytes, srcKind, LAG(end) OVER (ORDER BY start) AS prev_end
  FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1)
SELECT srcKind, bytes, COUNT(*) AS n, ROUND(AVG(end - start) / 1e3, 2) AS avg_dma_us,
       ROUND(AVG(CASE WHEN start - prev_end BETWEEN 0 AND 1000000 THEN start - prev_end END) / 1e3, 2) AS avg_gap_us,
       ROUND(SUM(bytes) * 1.0 / SUM(end - start), 2) AS GBps
FROM m WHERE bytes < 1048576 GROUP BY srcKind, bytes ORDER BY n DESC;
