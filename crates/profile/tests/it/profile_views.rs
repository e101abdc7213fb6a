//! search, timeline and export on real exports.

use crate::profile_common;

use aisp_profile::export::{self, Format};
use aisp_profile::search::{self, SearchKind};
use aisp_profile::summary::NameKey;
use aisp_profile::timeline::{self, TimelineOptions};
use aisp_profile::{Profile, ResolvedScope, Scope};
use profile_common::open;

fn all(p: &Profile) -> ResolvedScope {
    p.resolve(&Scope::default()).unwrap()
}

#[test]
fn search_finds_kernels_ranges_and_api_calls_with_bound_parameters() {
    let p = open("ddp.sqlite");
    let s = search::search(&p, &all(&p), "allreduce", &search::ALL_KINDS, 5).unwrap();
    assert_eq!(s.counts.get("kernel"), Some(&496));
    assert_eq!(s.counts.get("nvtx"), Some(&496));
    assert_eq!(s.names[0].name, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    assert_eq!(s.names[0].total_ns, 180_313_015);
    assert_eq!(s.matches.len(), 5);
    assert!(s.truncated);
    assert!(s.matches.windows(2).all(|w| w[0].start_ns <= w[1].start_ns));
    // Globs, kinds and device filters.
    let s = search::search(&p, &all(&p), "step_1?", &[SearchKind::Nvtx], 100).unwrap();
    assert_eq!(
        s.counts.get("nvtx"),
        Some(&20),
        "step_10..step_19 on 2 ranks"
    );
    let d1 = p
        .resolve(&Scope {
            device: Some(1),
            ..Scope::default()
        })
        .unwrap();
    let s = search::search(&p, &d1, "nccl*AllReduce*", &[SearchKind::Kernel], 1).unwrap();
    assert_eq!(s.counts.get("kernel"), Some(&248));
    assert_eq!(s.matches[0].device, Some(1));
    let s = search::search(&p, &all(&p), "cudaStreamSynchronize", &[SearchKind::Api], 3).unwrap();
    assert_eq!(s.counts.get("api"), Some(&132));
    // Quotes and LIKE metacharacters are data, not SQL.
    let s = search::search(
        &p,
        &all(&p),
        "x'); DROP TABLE StringIds; --",
        &search::ALL_KINDS,
        3,
    )
    .unwrap();
    assert!(s.counts.is_empty());
    let s = search::search(&p, &all(&p), "100%", &search::ALL_KINDS, 3).unwrap();
    assert!(s.counts.is_empty());
    assert!(search::search(&p, &all(&p), " ", &search::ALL_KINDS, 3).is_err());
}

#[test]
fn timeline_shows_a_typical_step_compactly() {
    let p = open("train_good.sqlite");
    let t = timeline::timeline(&p, &all(&p), &TimelineOptions::default()).unwrap();
    assert!(t.window_source.contains("step_"), "{}", t.window_source);
    assert_eq!(
        t.window.length_ns, 9_080_906,
        "the median step after the first"
    );
    let g = &t.gpu[0];
    assert_eq!((g.device, g.stream), (0, 7));
    let merged: u32 = g.entries.iter().map(|e| e.count).sum();
    assert!(g.entries.len() <= 40);
    assert!(merged as u64 <= g.events);
    let main = t.cpu.iter().find(|c| c.tid == 883).unwrap();
    let names: Vec<&str> = main.ranges.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        &names[..5],
        ["step_8", "data", "forward", "backward", "optimizer"]
    );
    assert_eq!(main.ranges[1].depth, 1);
    assert!(
        main.api
            .iter()
            .any(|e| e.name == "kernel launches" && e.count > 10)
    );
    // An explicit window.
    let s = p
        .resolve(&Scope {
            start_ns: Some(7_851_067_345),
            end_ns: Some(7_852_000_000),
            ..Scope::default()
        })
        .unwrap();
    let t = timeline::timeline(
        &p,
        &s,
        &TimelineOptions {
            limit: 3,
            merge_gap_ns: 0,
        },
    )
    .unwrap();
    assert_eq!(t.window.length_ns, 932_655);
    assert!(t.cpu.iter().all(|c| c.ranges.len() <= 3));
}

fn target(p: &std::path::Path) -> export::Output {
    export::Output::new(p, true).unwrap()
}

#[test]
fn exports_write_valid_perfetto_and_csv() {
    let dir = tempfile::tempdir().unwrap();
    let p = open("train_good.sqlite");
    let s = all(&p);
    let out = dir.path().join("t.json");
    let perfetto = || {
        export::export(
            &p,
            &s,
            Format::Perfetto,
            &target(&out),
            None,
            NameKey::Short,
            false,
        )
    };
    let e = perfetto().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    assert_eq!(ev.len() as u64, e.records);
    let kernels = ev.iter().filter(|x| x["cat"] == "kernel").count();
    assert_eq!(kernels, 3689);
    assert_eq!(
        ev.iter().filter(|x| x["ph"] == "s").count(),
        3689,
        "one flow per launched kernel"
    );
    assert!(
        ev.iter()
            .any(|x| x["ph"] == "M" && x["args"]["name"] == "GPU 0: NVIDIA H200")
    );
    assert!(
        ev.iter()
            .any(|x| x["ph"] == "M" && x["args"]["name"] == "pt_autograd_0")
    );
    assert!(
        ev.iter()
            .filter(|x| x["ph"] == "X")
            .all(|x| x["ts"].as_f64().unwrap() >= 0.0 && x["dur"].as_f64().unwrap() >= 0.0)
    );
    let step = ev
        .iter()
        .find(|x| x["cat"] == "nvtx" && x["name"] == "step_8")
        .unwrap();
    assert_eq!(step["dur"].as_f64().unwrap(), 9080.906);
    // Refuses to overwrite by default.
    assert!(perfetto().is_err());

    let csv_path = dir.path().join("k.csv");
    let e = export::export(
        &p,
        &s,
        Format::Csv,
        &target(&csv_path),
        Some("cuda_gpu_kern_sum"),
        NameKey::Short,
        false,
    )
    .unwrap();
    assert_eq!(e.records, 9);
    let text = std::fs::read_to_string(&csv_path).unwrap();
    let mut lines = text.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("time_pct,total_ns,instances")
    );
    assert!(lines.next().unwrap().starts_with("32.9,10537055,120,"));
    let trace = dir.path().join("trace.csv");
    let e = export::export(
        &p,
        &s,
        Format::Csv,
        &target(&trace),
        Some("kernels"),
        NameKey::Short,
        false,
    )
    .unwrap();
    assert_eq!(e.records, 3689);
    assert!(
        export::export(
            &p,
            &s,
            Format::Csv,
            &target(&dir.path().join("x.csv")),
            Some("nope"),
            NameKey::Short,
            false
        )
        .is_err()
    );
}
