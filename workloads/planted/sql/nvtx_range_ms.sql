-- CPU-side duration of every NVTX push/pop range name except the step_N ranges themselves (e.g. the 'data'
-- range that holds host augmentation, 'collate', 'metrics'): count, mean, min and max in ms. A range's
-- duration is host time (the thread was inside it), whatever the GPU did meanwhile. Skip the first WARM
-- occurrences of each name to leave the warm-up steps out (replace WARM, e.g. 3).
WITH r AS (
  SELECT COALESCE(n.text, s.value) AS name, n.end - n.start AS dur,
         ROW_NUMBER() OVER (PARTITION BY COALESCE(n.text, s.value) ORDER BY n.start) - 1 AS i
  FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
  WHERE n.eventType = 59 AND n.end IS NOT NULL AND COALESCE(n.text, s.value) NOT GLOB 'step_[0-9]*')
SELECT name, COUNT(*) AS n, ROUND(AVG(dur) / 1e6, 3) AS mean_ms, ROUND(MIN(dur) / 1e6, 3) AS min_ms,
       ROUND(MAX(dur) / 1e6, 3) AS max_ms
FROM r WHERE i >= WARM GROUP BY name ORDER BY mean_ms DESC;
