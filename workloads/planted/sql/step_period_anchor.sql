-- GPU step period without NVTX ranges: an anchor kernel that runs C times per step (C = its count /
-- steps); period = span of its starts after the warm-up / steps spanned. Replace ANCHOR, C, WARM.
WITH a AS (
  SELECT k.start, ROW_NUMBER() OVER (ORDER BY k.start) - 1 AS i
  FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
  WHERE s.value LIKE 'ANCHOR%')
SELECT COUNT(*) AS anchors, ROUND((MAX(start) - MIN(start)) / 1e6 / ((COUNT(*) - 1) / (C * 1.0)), 3) AS period_ms
FROM a WHERE i >= WARM * C;
