//! Answers composed without an LLM: the routed tools' results and the
//! knowledge base, laid out as facts (each citing its evidence), hypotheses
//! (labelled with where they come from), what the data cannot answer (and
//! which tool or capture would), and next steps.
//!
//! The wording is templated; every fact comes from a tool result.

use serde_json::Value;

use super::evidence::{Evidence, Finding, Ledger};
use super::router::{Intent, Route};
use crate::error::ErrorKind;
use aisp_knowledge::concepts;

/// The findings an answer relies on: medium severity or above, from every
/// successful evidence item, once per rule and device, most severe first,
/// then most time at stake (remaining ties keep the tools' order).
pub fn relied_findings(ledger: &Ledger) -> Vec<(Finding, String)> {
    let mut out: Vec<(Finding, String)> = Vec::new();
    for e in ledger.items() {
        for f in e.findings() {
            if f.at_least("medium")
                && !out
                    .iter()
                    .any(|(g, _)| g.id == f.id && g.device == f.device)
            {
                out.push((f, e.id.clone()));
            }
        }
    }
    // Most severe first, and within a severity the most GPU time at stake
    // (the rules' shares are of each device's analysis window).
    out.sort_by(|(a, _), (b, _)| {
        b.rank().cmp(&a.rank()).then(
            b.share_pct
                .unwrap_or(0.0)
                .total_cmp(&a.share_pct.unwrap_or(0.0)),
        )
    });
    out
}

fn args_brief(e: &Evidence) -> String {
    if e.arguments.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = e
        .arguments
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}: {}", super::client::truncate_chars(s, 60)),
            other => format!("{k}: {other}"),
        })
        .collect();
    format!(" ({})", parts.join(", "))
}

fn on_device(f: &Finding) -> String {
    f.device
        .map(|d| format!(", device {d}"))
        .unwrap_or_default()
}

fn share(f: &Finding) -> String {
    match f.share_pct {
        Some(s) => format!(", {s:.1} % of the time at stake"),
        None => String::new(),
    }
}

/// Facts from one evidence item (markdown bullets).
fn facts_of(e: &Evidence, out: &mut Vec<String>) {
    let head = format!("[{}] `{}`{}", e.id, e.tool, args_brief(e));
    let v = match &e.result {
        Ok(v) => v,
        Err(_) => return,
    };
    let findings = e.findings();
    if !findings.is_empty() {
        let serious: Vec<&Finding> = findings.iter().filter(|f| f.at_least("medium")).collect();
        let minor = findings.len() - serious.len();
        out.push(format!(
            "{head}: {} finding(s) at medium severity or above{}.",
            serious.len(),
            if minor > 0 {
                format!(", {minor} below")
            } else {
                String::new()
            }
        ));
        for f in serious {
            let mut line = format!(
                "  - **{}** `{}`{}: {}{}",
                f.severity,
                f.id,
                f.device
                    .map(|d| format!(" (device {d})"))
                    .unwrap_or_default(),
                f.title,
                share(f)
            );
            if let Some(ev) = &f.evidence {
                line.push_str(&format!(". {}", super::client::truncate_chars(ev, 400)));
            }
            out.push(line);
        }
        return;
    }
    match e.tool.as_str() {
        "aisp_ai_troubleshoot" => {
            if let Some(m) = v
                .get("matches")
                .and_then(Value::as_array)
                .and_then(|m| m.first())
            {
                out.push(format!(
                    "{head}: the text matches the known symptom **{}** ({}).",
                    m.get("title").and_then(Value::as_str).unwrap_or("?"),
                    m.get("summary").and_then(Value::as_str).unwrap_or("")
                ));
            }
        }
        "aisp_explain" => {
            if let Some(c) = v.get("concept").filter(|c| c.is_object()) {
                out.push(format!(
                    "{head}: **{}**: {}",
                    c.get("name").and_then(Value::as_str).unwrap_or("?"),
                    c.get("definition").and_then(Value::as_str).unwrap_or("")
                ));
            }
        }
        _ => out.push(format!("{head}: {}", e.quote())),
    }
}

/// Ranked causes from a troubleshooting result (markdown bullets).
fn causes_of(e: &Evidence, max: usize) -> Vec<String> {
    let Ok(v) = &e.result else {
        return Vec::new();
    };
    let Some(m) = v
        .get("matches")
        .and_then(Value::as_array)
        .and_then(|m| m.first())
    else {
        return Vec::new();
    };
    m.get("causes")
        .and_then(Value::as_array)
        .map(|causes| {
            causes
                .iter()
                .take(max)
                .enumerate()
                .map(|(i, c)| {
                    let checks: Vec<String> = c
                        .get("checks")
                        .and_then(Value::as_array)
                        .map(|cs| {
                            cs.iter()
                                .filter_map(|x| x.get("tool").and_then(Value::as_str))
                                .map(|t| format!("`{t}`"))
                                .collect()
                        })
                        .unwrap_or_default();
                    let hinted = c
                        .get("matched_hints")
                        .and_then(Value::as_array)
                        .is_some_and(|h| !h.is_empty());
                    format!(
                        "{}. {}{} — {} Check with {}. [{}]",
                        i + 1,
                        c.get("cause").and_then(Value::as_str).unwrap_or("?"),
                        if hinted { " (your text names it)" } else { "" },
                        c.get("why").and_then(Value::as_str).unwrap_or(""),
                        if checks.is_empty() {
                            "the tools listed in the citation".to_string()
                        } else {
                            checks.join(", ")
                        },
                        e.id
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Busy % per device from a utilization result, in the most telling window
/// (steady, else steps, else span): `(device, window kind, busy %)`.
fn busy_by_device(v: &Value) -> Vec<(i64, String, f64)> {
    let mut out = Vec::new();
    for d in v
        .get("devices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(device) = d.get("device").and_then(Value::as_i64) else {
            continue;
        };
        let windows = d.get("windows").and_then(Value::as_array);
        let pick = ["steady", "steps", "span"].iter().find_map(|kind| {
            windows?.iter().find_map(|w| {
                (w.get("window")?.get("kind")?.as_str()? == *kind)
                    .then(|| w.get("busy_pct")?.as_f64())
                    .flatten()
                    .map(|b| (kind.to_string(), b))
            })
        });
        if let Some((kind, busy)) = pick {
            out.push((device, kind, busy));
        }
    }
    out
}

/// What the data cannot answer for this route, and what would.
fn gaps(
    route: &Route,
    ledger: &Ledger,
    has_profile: bool,
    findings: &[(Finding, String)],
) -> Vec<String> {
    let mut out = Vec::new();
    for e in ledger.items() {
        if let Err(err) = &e.result {
            let line = if err.kind == ErrorKind::NotFound && err.message.contains("no tool named") {
                format!(
                    "`{}` is not available in this aisp build, so what it would show is missing here.",
                    e.tool
                )
            } else {
                format!(
                    "`{}` could not run ({}: {}). {}",
                    e.tool, err.kind, err.message, err.hint
                )
            };
            out.push(line);
        }
    }
    let needs_profile = matches!(
        route.intent,
        Intent::SlowTraining
            | Intent::MultiGpuScaling
            | Intent::SlowKernel
            | Intent::DataLoading
            | Intent::InferenceLatency
            | Intent::General
    );
    if !has_profile && needs_profile {
        out.push(
            "Where the time goes in your run: no profile was attached. Capture one with `aisp_profile_nsys` \
             (needs command execution allowed) or `nsys profile -t cuda,nvtx,osrt -o run python train.py` followed by \
             `nsys export --type sqlite run.nsys-rep`, then ask again with `profile` set to the .sqlite."
                .into(),
        );
    }
    match route.intent {
        Intent::SlowKernel => out.push(
            "Per-kernel hardware counters (achieved occupancy, memory and compute throughput, stall reasons) are not \
             in an Nsight Systems profile: run `aisp_profile_ncu` on the kernel (or `ncu --set detailed -k <name> ...`)."
                .into(),
        ),
        Intent::OutOfMemory => out.push(
            "What holds the memory at the peak: a PyTorch memory snapshot \
             (`torch.cuda.memory._record_memory_history()` then `torch.cuda.memory._dump_snapshot(...)`) or \
             `aisp_profile_torch` with memory profiling; an Nsight Systems capture shows CUDA memory use only with \
             `--cuda-memory-usage=true`."
                .into(),
        ),
        Intent::InferenceLatency => out.push(
            "Measured latency under your request mix: aisp's estimates are rooflines, not measurements; a load test \
             against the running server (e.g. vLLM's serving benchmark) measures TTFT and inter-token latency."
                .into(),
        ),
        Intent::MultiGpuScaling if !has_profile => out.push(
            "Measured link and collective bandwidth: `aisp_hw_p2p` and `aisp_hw_nccl` on the GPU host; a \
             multi-rank Nsight Systems capture shows how much communication is exposed."
                .into(),
        ),
        _ => {}
    }
    if has_profile
        && findings.iter().any(|(f, _)| {
            let id = f.id.to_lowercase();
            id.contains("host") || id.contains("starv") || id.contains("gap") || id.contains("idle")
        })
    {
        out.push(
            "Which Python code the CPU is busy in while the GPU waits: Nsight Systems traces CUDA and OS calls, not \
             Python frames; capture again with `--python-sampling=true`, or profile the host with `py-spy`, to name it."
                .into(),
        );
    }
    out
}

/// The earlier turn a follow-up answers after, as the composer needs it.
#[derive(Debug, Clone, Copy)]
pub struct EarlierTurn<'a> {
    pub question: &'a str,
    pub answer: &'a str,
}

/// Words that ask how to fix what was found.
fn asks_for_a_fix(question: &str) -> bool {
    let q = question.to_lowercase();
    [
        "fix",
        "how do i",
        "how can i",
        "what should i",
        "change",
        "solve",
        "improve",
        "speed it up",
        "make it faster",
    ]
    .iter()
    .any(|w| q.contains(w))
}

/// The answer to a follow-up: what the earlier answer did not say yet, not the same summary again.
fn follow_up(
    question: &str,
    findings: &[(Finding, String)],
    earlier: EarlierTurn<'_>,
) -> Option<String> {
    let (top, ev) = findings.first()?;
    let mut md = String::new();
    if asks_for_a_fix(question) {
        md.push_str(&format!(
            "What to change for **{}** (`{}`) [{ev}]:\n\n",
            top.title, top.id
        ));
        md.push_str(&format!(
            "- Fix: {}\n",
            top.fix
                .as_deref()
                .unwrap_or("the rule gives no fix of its own; see the facts below")
        ));
        if let Some(v) = &top.verify {
            md.push_str(&format!("- Then verify: {v}\n"));
        }
        if let Some(next) = findings.get(1) {
            md.push_str(&format!(
                "\nAfter that, the next at stake is **{}** (`{}`, {}) [{}]{}.\n",
                next.0.title,
                next.0.id,
                next.0.severity,
                next.1,
                next.0
                    .fix
                    .as_deref()
                    .map(|f| format!(": {f}"))
                    .unwrap_or_default()
            ));
        }
        return Some(md);
    }
    let new: Vec<&(Finding, String)> = findings
        .iter()
        .filter(|(f, _)| !earlier.answer.contains(&f.id))
        .collect();
    if new.is_empty() {
        md.push_str(&format!(
            "The earlier answer named every finding at medium severity or above. More on the top one, **{}** (`{}`) \
             [{ev}]: {}{}\n",
            top.title,
            top.id,
            top.why.as_deref().unwrap_or(""),
            top.evidence
                .as_deref()
                .map(|e| format!(" Evidence: {e}"))
                .unwrap_or_default()
        ));
    } else {
        md.push_str("Besides what the earlier answer named:\n\n");
        for (f, ev) in new {
            md.push_str(&format!(
                "- **{}** (`{}`, {}{}) [{ev}]{}\n",
                f.title,
                f.id,
                f.severity,
                on_device(f),
                f.fix
                    .as_deref()
                    .map(|x| format!(": {x}"))
                    .unwrap_or_default()
            ));
        }
    }
    Some(md)
}

/// Compose the answer. `reason` says why no LLM answered; `earlier` is the conversation's last turn when
/// this question follows up on it.
pub fn compose(
    question: &str,
    route: &Route,
    ledger: &Ledger,
    has_profile: bool,
    reason: &str,
    earlier: Option<EarlierTurn<'_>>,
) -> String {
    let findings = relied_findings(ledger);
    let mut md = String::new();
    md.push_str(&format!(
        "> **No LLM was used.** {reason} aisp routed the question by intent (**{}**) to its own tools and composed \
         this answer from their results and its knowledge base: the wording is templated, the facts come from the \
         cited tool results.\n\n",
        route.intent.label()
    ));
    if let Some(e) = earlier {
        md.push_str(&format!(
            "> Follow-up to “{}”.\n\n",
            super::client::truncate_chars(e.question, 200)
        ));
    }

    // Answer.
    md.push_str("## Answer\n\n");
    let rules = ledger.from_tool("aisp_profile_rules");
    let troubleshoot = ledger.from_tool("aisp_ai_troubleshoot");
    let explain = ledger.from_tool("aisp_explain");
    if let Some(text) = earlier.and_then(|e| follow_up(question, &findings, e)) {
        md.push_str(&text);
    } else if let Some((top, ev)) = findings.first() {
        md.push_str(&format!(
            "aisp's rules report {} finding(s) at medium severity or above. The most serious is **{}** (`{}`, {}{}{}) [{ev}].",
            findings.len(),
            top.title,
            top.id,
            top.severity,
            on_device(top),
            share(top)
        ));
        if findings.len() > 1 {
            let rest: Vec<String> = findings[1..]
                .iter()
                .map(|(f, ev)| format!("`{}` ({}{}) [{ev}]", f.id, f.severity, on_device(f)))
                .collect();
            md.push_str(&format!(" Also: {}.", rest.join(", ")));
        }
        md.push('\n');
    } else if let Some(r) = rules {
        let minor = r.findings().len();
        md.push_str(&format!(
            "aisp's rules report nothing at medium severity or above in this profile{} [{}]. That is insufficient \
             signal to name a single cause from the rules alone; the facts below say what the profile does show.\n",
            if minor > 0 {
                format!(" ({minor} lower-severity finding(s))")
            } else {
                String::new()
            },
            r.id
        ));
    } else if let Some(t) = troubleshoot {
        let first = causes_of(t, 1);
        md.push_str(&format!(
            "Your text matches a known symptom; the likeliest cause, by aisp's troubleshooting table, is {} The \
             ranked causes and the checks that confirm or rule out each are below.\n",
            first
                .first()
                .map(|c| c.trim_start_matches("1. ").to_string())
                .unwrap_or_else(|| "listed below.".into())
        ));
    } else if let Some(x) = explain
        && route.intent == Intent::Concept
    {
        let c = x.result.as_ref().ok().and_then(|v| v.get("concept"));
        md.push_str(&format!(
            "**{}**: {} [{}]\n",
            c.and_then(|c| c.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("?"),
            c.and_then(|c| c.get("definition"))
                .and_then(Value::as_str)
                .unwrap_or(""),
            x.id
        ));
    } else if has_profile {
        md.push_str(
            "The profile could not be analysed by aisp's rules (see below), so this answer cannot say what limits \
             the run.\n",
        );
    } else {
        md.push_str(
            "Without a profile or measurements of your run, aisp cannot say what limits it. Below is what it could \
             check from here and what to capture next.\n",
        );
    }

    // Facts.
    let mut facts = Vec::new();
    for e in ledger.items() {
        facts_of(e, &mut facts);
    }
    md.push_str("\n## Facts\n\n");
    if facts.is_empty() {
        md.push_str("- No tool produced a result for this question.\n");
    } else {
        for f in &facts {
            if f.starts_with("  ") {
                md.push_str(&format!("{f}\n"));
            } else {
                md.push_str(&format!("- {f}\n"));
            }
        }
    }

    // Hypotheses.
    let mut hyp = Vec::new();
    for (f, ev) in &findings {
        if let Some(why) = &f.why {
            let confidence = if f.at_least("high") { "high" } else { "medium" };
            hyp.push(format!(
                "`{}` (confidence {confidence}, from the rule's evidence): {} [{ev}]",
                f.id,
                super::client::truncate_chars(why, 500)
            ));
        }
    }
    if let Some(t) = troubleshoot {
        for c in causes_of(t, 4) {
            hyp.push(c);
        }
    }
    let mut gpu_bound = false;
    if let Some(u) = ledger.from_tool("aisp_profile_utilization")
        && let Ok(v) = &u.result
    {
        for (device, kind, busy) in busy_by_device(v) {
            if busy >= 85.0 && findings.is_empty() {
                // With findings, they carry the story (a busy GPU may be busy
                // with exposed communication); without, a busy GPU says where to look.
                gpu_bound = true;
                hyp.push(format!(
                    "Device {device} is busy {busy:.2} % of the {kind} window: the time is in the kernels themselves, \
                     so speed comes from faster kernels (tensor cores, lower precision, fusion), not from the host. \
                     `aisp_profile_kernels` shows which kernels and their class; `aisp_profile_ncu` why one is slow. [{}]",
                    u.id
                ));
            } else if busy < 50.0 && findings.is_empty() {
                hyp.push(format!(
                    "Device {device} is busy only {busy:.2} % of the {kind} window while no rule crossed its threshold: \
                     the idle time is spread thin; `aisp_profile_gaps` lists where it goes. [{}]",
                    u.id
                ));
            }
        }
    }
    let concept_ids: Vec<&str> = route.intent.concepts().to_vec();
    let general: Vec<String> = concept_ids
        .iter()
        .filter_map(|id| concepts::get(id))
        .map(|c| format!("{} (`aisp_explain {}`)", c.name, c.id))
        .collect();
    if !general.is_empty() && findings.is_empty() && !gpu_bound {
        hyp.push(format!(
            "Common causes of {} (general knowledge, not measured here): {}.",
            route.intent.label(),
            general.join("; ")
        ));
    }
    md.push_str("\n## Hypotheses\n\n");
    if hyp.is_empty() {
        md.push_str("- None that the evidence supports.\n");
    } else {
        for h in &hyp {
            md.push_str(&format!("- {h}\n"));
        }
    }

    // What the data cannot answer.
    let missing = gaps(route, ledger, has_profile, &findings);
    if !missing.is_empty() {
        md.push_str("\n## What the data cannot answer\n\n");
        for g in &missing {
            md.push_str(&format!("- {g}\n"));
        }
    }

    // Next steps.
    let mut next = Vec::new();
    for (f, ev) in &findings {
        match (&f.fix, &f.verify) {
            (Some(fix), Some(verify)) => next.push(format!(
                "`{}`: {} Verify: {} [{ev}]",
                f.id,
                super::client::truncate_chars(fix, 400),
                super::client::truncate_chars(verify, 300)
            )),
            (Some(fix), None) => next.push(format!(
                "`{}`: {} [{ev}]",
                f.id,
                super::client::truncate_chars(fix, 400)
            )),
            _ => {}
        }
    }
    if !findings.is_empty() || rules.is_some() {
        next.push(
            "After a change, capture again and compare the two profiles with `aisp_profile_compare` (before, after)."
                .into(),
        );
    }
    if findings.is_empty() && !has_profile {
        let suggested = crate::suggest::rank(question, crate::registry::tools());
        let names: Vec<String> = suggested
            .iter()
            .filter(|r| !ledger.items().iter().any(|e| e.tool == r.tool.name))
            .filter(|r| !matches!(r.tool.name.as_str(), "aisp_ask" | "aisp_suggest_tools"))
            .take(3)
            .map(|r| format!("`{}`", r.tool.name))
            .collect();
        if !names.is_empty() {
            next.push(format!(
                "Tools that fit the question's words, not run here: {}.",
                names.join(", ")
            ));
        }
    }
    if !next.is_empty() {
        md.push_str("\n## Next steps\n\n");
        for n in &next {
            md.push_str(&format!("- {n}\n"));
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::OpError;
    use crate::llm::router::classify;
    use serde_json::json;

    fn ledger_with_rules() -> Ledger {
        let mut l = Ledger::default();
        l.record(
            "aisp_profile_rules",
            json!({"path": "t.sqlite"}).as_object().unwrap().clone(),
            Ok(json!({"findings": [
                {"id": "low_one", "title": "Minor", "severity": "low"},
                {"id": "host_bound", "title": "Host-bound steps", "severity": "high", "share_pct": 91.3,
                 "evidence": "39 gaps", "why": "CPU stalls", "fix": "prefetch", "verify": "busy % rises"},
                {"id": "pageable", "title": "Pageable copies", "severity": "medium", "why": "staging"}
            ]})),
        );
        l.record(
            "aisp_profile_utilization",
            json!({"path": "t.sqlite"}).as_object().unwrap().clone(),
            Err(OpError::not_found(
                "no tool named `aisp_profile_utilization`",
                "h",
            )),
        );
        l
    }

    #[test]
    fn findings_at_medium_or_above_are_relied_on_most_severe_first() {
        let l = ledger_with_rules();
        let ids: Vec<String> = relied_findings(&l).into_iter().map(|(f, _)| f.id).collect();
        assert_eq!(ids, vec!["host_bound", "pageable"]);
    }

    #[test]
    fn the_answer_says_no_llm_cites_and_names_the_gaps() {
        let l = ledger_with_rules();
        let route = classify("why is this training slow?", true);
        let md = compose(
            "why is this training slow?",
            &route,
            &l,
            true,
            "No LLM endpoint is configured.",
            None,
        );
        assert!(md.starts_with("> **No LLM was used.** No LLM endpoint is configured."));
        assert!(
            md.contains(
                "**Host-bound steps** (`host_bound`, high, 91.3 % of the time at stake) [E1]"
            ),
            "{md}"
        );
        assert!(md.contains("`pageable` (medium) [E1]"));
        assert!(!md.contains("low_one`:"), "low findings are not relied on");
        assert!(md.contains("## What the data cannot answer"));
        assert!(md.contains("`aisp_profile_utilization` is not available in this aisp build"));
        assert!(md.contains("--python-sampling=true"));
        assert!(md.contains("Verify: busy % rises [E1]"));
    }

    #[test]
    fn without_a_profile_the_answer_says_what_to_capture() {
        let route = classify("why is my training slow?", false);
        let md = compose(
            "why is my training slow?",
            &route,
            &Ledger::default(),
            false,
            "x.",
            None,
        );
        assert!(md.contains("cannot say what limits it"));
        assert!(md.contains("nsys profile -t cuda,nvtx,osrt"));
    }

    #[test]
    fn a_follow_up_answers_what_was_not_said_yet() {
        let l = ledger_with_rules();
        let first_q = "why is this training slow?";
        let first = compose(first_q, &classify(first_q, true), &l, true, "x.", None);
        let earlier = Some(EarlierTurn {
            question: first_q,
            answer: &first,
        });
        let fix_q = "how do I fix it?";
        let fix = compose(fix_q, &classify(fix_q, true), &l, true, "x.", earlier);
        assert!(
            fix.contains("> Follow-up to “why is this training slow?”"),
            "{fix}"
        );
        let answer = |md: &str| {
            md.split("## Answer")
                .nth(1)
                .unwrap()
                .split("\n## ")
                .next()
                .unwrap()
                .to_string()
        };
        assert_ne!(
            answer(&fix),
            answer(&first),
            "a follow-up is not the same template again"
        );
        assert!(
            answer(&fix).contains("What to change for **Host-bound steps**"),
            "{fix}"
        );
        // An answer that named only the top finding: the follow-up gives the rest.
        let short = "The most serious is `host_bound`.";
        let more_q = "what else?";
        let more = compose(
            more_q,
            &classify(more_q, true),
            &l,
            true,
            "x.",
            Some(EarlierTurn {
                question: first_q,
                answer: short,
            }),
        );
        assert!(
            answer(&more).contains("Besides what the earlier answer named"),
            "{more}"
        );
        assert!(
            answer(&more).contains("`pageable`") && !answer(&more).contains("`host_bound`"),
            "{more}"
        );
    }
}
