//! Routing quality of `aisp_suggest_tools` over the evaluation set in
//! `tests/data/routing_eval.toml` (written before the ranking was tuned; a
//! held-out part never tuned on), on a host without a GPU:
//! - the first suggestion is right for at least 85 % of the questions,
//! - a right tool is in the top three for at least 95 %,
//! - a tool that needs a GPU is never first unless the question is about the GPU,
//!
//! each for the tuned part and the held-out part separately (see the floors below).

use aisp::app::AppState;
use aisp::context::OpContext;
use aisp::ops::ai::{SuggestTools, SuggestToolsInput};
use aisp::registry::{self, Operation};
use aisp_hw::gpu::GpuAvailability;
use serde::Deserialize;

#[derive(Deserialize)]
struct EvalSet {
    question: Vec<Question>,
}

#[derive(Deserialize)]
struct Question {
    text: String,
    expect: Vec<String>,
    #[serde(default)]
    heldout: bool,
    /// The first held-out third: looked at on 2026-11-25, tuned since.
    #[serde(default)]
    heldout_v1: bool,
    #[serde(default)]
    about_gpu: bool,
}

#[derive(Default)]
struct Tally {
    total: usize,
    first: usize,
    top3: usize,
    gpu_first_wrongly: Vec<String>,
    misses: Vec<String>,
}

impl Tally {
    fn first_rate(&self) -> f64 {
        self.first as f64 / self.total as f64
    }
    fn top3_rate(&self) -> f64 {
        self.top3 as f64 / self.total as f64
    }
}

#[test]
fn suggestions_route_everyday_questions_to_the_right_tool() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/routing_eval.toml"),
    )
    .unwrap();
    let set: EvalSet = toml::from_str(&text).unwrap();
    assert!(set.question.len() >= 60);
    let app = AppState::for_tests();
    app.set_gpu_for_tests(GpuAvailability::unavailable("evaluation host", false));
    let ctx = OpContext::detached(app);
    let (mut tuned, mut heldout) = (Tally::default(), Tally::default());
    let mut first_heldout = Tally::default();
    for q in &set.question {
        for e in &q.expect {
            assert!(registry::find(e).is_some(), "unknown tool {e}");
        }
        let out = SuggestTools
            .run(
                &ctx,
                SuggestToolsInput {
                    task: q.text.clone(),
                    limit: Some(3),
                    llm: None,
                },
            )
            .unwrap();
        let names: Vec<&str> = out.suggestions.iter().map(|s| s.tool.as_str()).collect();
        let right = |n: &&str| q.expect.iter().any(|e| e == n);
        let first_right = names.first().is_some_and(right);
        let top3_right = names.iter().take(3).any(right);
        if q.heldout_v1 {
            // Counted in the tuned part as well; reported apart for its history
            // (77.8 % first before 2026-11-25).
            first_heldout.total += 1;
            first_heldout.first += usize::from(first_right);
            first_heldout.top3 += usize::from(top3_right);
        }
        let tally = if q.heldout { &mut heldout } else { &mut tuned };
        tally.total += 1;
        if first_right {
            tally.first += 1;
        } else {
            tally
                .misses
                .push(format!("{:?} -> {names:?} (want {:?})", q.text, q.expect));
        }
        if top3_right {
            tally.top3 += 1;
        }
        if let Some(first) = names.first()
            && registry::find(first).unwrap().spec().needs_gpu
            && !q.about_gpu
        {
            tally
                .gpu_first_wrongly
                .push(format!("{:?} -> {first}", q.text));
        }
    }
    for (name, t) in [
        ("tuned", &tuned),
        ("first held-out set (now tuned)", &first_heldout),
        ("held-out", &heldout),
    ] {
        eprintln!(
            "{name}: {} questions, first right {}/{} = {:.1} %, top 3 {}/{} = {:.1} %",
            t.total,
            t.first,
            t.total,
            100.0 * t.first_rate(),
            t.top3,
            t.total,
            100.0 * t.top3_rate()
        );
        // Held-out misses stay hidden while tuning; set the variable to see them.
        if name == "tuned" || std::env::var_os("AISP_ROUTING_SHOW_HELDOUT").is_some() {
            for m in &t.misses {
                eprintln!("  miss: {m}");
            }
        }
    }
    // The goal is 85 % first and 95 % top three on both parts. The held-out
    // part (36 questions written on 2026-11-25 before they were first run)
    // reached 91.7 % / 100 % at its first run.
    assert!(
        heldout.total >= 30,
        "the held-out part has {} questions",
        heldout.total
    );
    for (name, t, first, top3) in [
        ("tuned", &tuned, 0.85, 0.95),
        ("held-out", &heldout, 0.85, 0.95),
    ] {
        assert!(
            t.gpu_first_wrongly.is_empty(),
            "{name}: a GPU tool came first on a host without a GPU ({} questions)",
            t.gpu_first_wrongly.len()
        );
        assert!(
            t.first_rate() >= first,
            "{name}: first suggestion right for {:.1} % (want >= {:.0} %)",
            100.0 * t.first_rate(),
            100.0 * first
        );
        assert!(
            t.top3_rate() >= top3,
            "{name}: right tool in the top three for {:.1} % (want >= {:.0} %)",
            100.0 * t.top3_rate(),
            100.0 * top3
        );
    }
}
