-- Independent step periods of a planted export (issue 32), read with plain SQL: no aisp code.
-- scripts/planted_steps.py runs these on every tuned case (before and fixed, every rank of a set).
--
-- Q1 (:nvtx) GPU step period from NVTX `step_N` ranges. A step's GPU work is every kernel, memcpy and
-- memset whose launching CUDA runtime call (same correlationId, same process, any thread) starts
-- inside the step's range; the step's period runs from its first GPU operation to the next step's
-- first GPU operation (so a CPU that runs ahead, with short ranges, does not shorten it). One row per
-- step: step number, first GPU start, ops. The script takes first-start differences.
-- @nvtx
WITH st AS (
  SELECT CAST(substr(COALESCE(n.text, s.value), 6) AS INTEGER) AS step, n.start, n.end,
         n.globalTid / 16777216 AS proc
  FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
  WHERE n.eventType = 59 AND COALESCE(n.text, s.value) GLOB 'step_[0-9]*'),
calls AS (
  SELECT r.correlationId, r.start, r.globalTid / 16777216 AS proc FROM CUPTI_ACTIVITY_KIND_RUNTIME r),
ops AS (
  SELECT correlationId, globalPid / 16777216 AS proc, start FROM CUPTI_ACTIVITY_KIND_KERNEL
  UNION ALL SELECT correlationId, globalPid / 16777216, start FROM CUPTI_ACTIVITY_KIND_MEMCPY
  UNION ALL SELECT correlationId, globalPid / 16777216, start FROM CUPTI_ACTIVITY_KIND_MEMSET)
SELECT st.step, MIN(o.start) AS first_start, COUNT(*) AS ops
FROM st
JOIN calls c ON c.proc = st.proc AND c.start >= st.start AND c.start < st.end
JOIN ops o ON o.correlationId = c.correlationId AND o.proc = c.proc
GROUP BY st.step ORDER BY st.step;

-- Q2 (:anchor) Without NVTX ranges: the starts of one anchor kernel, in time order (the script keeps
-- every C-th, C = the anchor's launches per step = its count / the program's steps).
-- @anchor
SELECT k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
WHERE s.value = :anchor ORDER BY k.start;
