//! Cross-rank analysis on real data: the two-GPU DDP export split per rank
//! (with the dev tool `examples/export_edit.rs`, included as a module) gives
//! the same per-rank figures as the combined export; a 64-rank set made from
//! its ranks with shifted clocks, wrong session starts and a planted
//! straggler recovers the offsets and names the straggler and its cost.

use crate::profile_common;

use crate::export_edit;

use std::path::{Path, PathBuf};

use aisp_profile::nccl::Collective;
use aisp_profile::ranks::{self, RankDigest, digest, store};
use profile_common::fixture;

fn never() -> bool {
    false
}

fn split_ddp(dir: &Path) -> Vec<PathBuf> {
    export_edit::split(&fixture("ddp.sqlite"), dir, true)
        .expect("split")
        .into_iter()
        .map(|f| f.path)
        .collect()
}

fn digest_set(files: &[PathBuf]) -> (ranks::RankSet, Vec<RankDigest>) {
    let (mut d, skipped) = digest::digest_files(files, 2, &never, &|_| {}).expect("digest");
    assert!(skipped.is_empty(), "{skipped:?}");
    let names = files.iter().map(|f| f.display().to_string()).collect();
    let set = ranks::merge(&mut d, names, Vec::new()).expect("merge");
    (set, d)
}

/// The first place two JSON documents differ, as a path and the two values.
fn first_difference(a: &serde_json::Value, b: &serde_json::Value, path: &str) -> Option<String> {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => x.keys().chain(y.keys()).find_map(|k| {
            let (va, vb) = (
                x.get(k).unwrap_or(&Value::Null),
                y.get(k).unwrap_or(&Value::Null),
            );
            first_difference(va, vb, &format!("{path}.{k}"))
        }),
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (va, vb))| first_difference(va, vb, &format!("{path}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{path}: {} vs {}", short(a), short(b))),
    }
}

fn short(v: &serde_json::Value) -> String {
    let s = v.to_string();
    if s.len() > 400 {
        format!("{}… ({} chars)", &s[..400], s.len())
    } else {
        s
    }
}

/// Asserts two digests hold the same figures, naming the first difference.
fn same_figures(a: &RankDigest, b: &RankDigest) {
    let (fa, fb) = (figures(a), figures(b));
    if fa != fb {
        let (va, vb): (serde_json::Value, serde_json::Value) = (
            serde_json::from_str(&fa).unwrap(),
            serde_json::from_str(&fb).unwrap(),
        );
        panic!(
            "rank {}: {:?}",
            a.identity.rank,
            first_difference(&va, &vb, "")
        );
    }
}

/// Everything but where the rank was read from.
fn figures(d: &RankDigest) -> String {
    let mut d = d.clone();
    d.identity.file = String::new();
    d.identity.rank_source = String::new();
    d.identity.env_rank = None;
    d.identity.local_rank = None;
    d.identity.world_size = None;
    d.identity.rank = 0;
    // Kernel indices are positions in the export read (two ranks in one export number their kernels
    // together): keep only their order.
    let mut indices: Vec<u32> = d.collectives.iter().filter_map(|c| c.kernel).collect();
    if let Some(l) = &d.ledger {
        indices.extend(l.comm.iter().map(|p| p.kernel));
    }
    indices.sort_unstable();
    indices.dedup();
    let order = |k: u32| indices.binary_search(&k).unwrap() as u32;
    for c in &mut d.collectives {
        c.kernel = c.kernel.map(order);
    }
    if let Some(l) = &mut d.ledger {
        for p in &mut l.comm {
            p.kernel = order(p.kernel);
        }
    }
    serde_json::to_string(&d).unwrap()
}

/// Every tool a finding's texts send the reader to exists (`aisp_system_*` names a domain).
fn names_real_tools(findings: &[aisp_profile::rules::Finding]) {
    let re = regex::Regex::new(r"aisp_[a-z0-9_]+").unwrap();
    for f in findings {
        for text in [&f.why, &f.fix, &f.verify] {
            for m in re.find_iter(text) {
                let name = m.as_str();
                assert!(
                    name.ends_with('_') || aisp::registry::find(name).is_some(),
                    "{}: no tool {name}",
                    f.id
                );
            }
        }
    }
}

#[test]
fn split_per_rank_gives_the_combined_exports_figures() {
    let tmp = tempfile::tempdir().unwrap();
    // Not slimmed: the OS runtime calls explain some of the ledger's idle time.
    let files: Vec<PathBuf> = export_edit::split(&fixture("ddp.sqlite"), tmp.path(), false)
        .expect("split")
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert_eq!(files.len(), 2);
    // The combined export: two ranks, read from one file.
    let combined_path = fixture("ddp.sqlite");
    let p = aisp_profile::open(&combined_path).unwrap();
    let mut combined = digest::digest_profile(&p, &combined_path).unwrap();
    assert_eq!(combined.len(), 2);
    // Merged like a set of files, so that both sides split their collectives into wait and transfer.
    ranks::merge(
        &mut combined,
        vec![combined_path.display().to_string()],
        Vec::new(),
    )
    .unwrap();
    let (set, split) = digest_set(&files);
    // Identity: RANK recorded in each per-rank capture's environment.
    for (r, d) in split.iter().enumerate() {
        assert_eq!(d.identity.rank, r as u32);
        assert_eq!(d.identity.rank_source, "env RANK");
        assert_eq!(d.identity.device, r as i64);
        assert_eq!(d.identity.pid, [640, 641][r]);
        assert_eq!(d.identity.hostname.as_deref(), Some("vm"));
    }
    for (a, b) in combined.iter().zip(&split) {
        same_figures(a, b);
    }
    // The figures are the fixture's ground truth (tests/data/README.md).
    let truth = [
        (3592, 176_757_905, 150_186_366, 26_571_539, 65_281_076),
        (3592, 239_383_895, 182_966_536, 56_417_359, 123_175_438),
    ];
    for (d, (n, sum, union, overlap, _nccl_sum)) in split.iter().zip(truth) {
        assert_eq!(d.kernels, n);
        assert_eq!(d.kernel_sum_ns, sum);
        let span = d.window("span").unwrap();
        assert_eq!(span.busy_ns, union);
        assert_eq!(span.overlap_ns, overlap);
        assert_eq!(d.steps.len(), 20);
        let all_reduce = d
            .collectives
            .iter()
            .filter(|c| c.kind == Collective::AllReduce)
            .count();
        assert_eq!(all_reduce, 248);
        assert_eq!(d.collectives.len(), 256);
    }
    // Busy % of the steady window (the ledger's, on the GPU timeline): the union of the device's kernels
    // clipped to it, by SQL over ddp.sqlite: rank 0 131.71 ms of [19635879405, 19791235472), rank 1
    // 152.35 ms of [19634837332, 19790339450).
    let pct = |d: &RankDigest| {
        let w = d.window("steady").unwrap();
        (w.busy_ns as f64 * 10000.0 / w.window.length_ns as f64).round() / 100.0
    };
    let w0 = split[0].window("steady").unwrap();
    assert_eq!(
        (w0.window.start_ns, w0.window.end_ns, w0.busy_ns),
        (19_635_879_405, 19_791_235_472, 131_714_536)
    );
    assert_eq!(pct(&split[0]), 84.78);
    let w1 = split[1].window("steady").unwrap();
    assert_eq!(
        (w1.window.start_ns, w1.window.end_ns, w1.busy_ns),
        (19_634_837_332, 19_790_339_450, 152_348_449)
    );
    assert_eq!(pct(&split[1]), 97.97);
    // One session: the clocks agree (true offset 0). The collective ends say so within 50 µs: the ranks'
    // all-reduce kernels end a median 18.7 µs apart (the last arrival finishes last), which is the
    // refinement's bias on this pair, and the residual reports that doubt.
    let d1 = &set.alignment.domains[1];
    assert_eq!(d1.method, "collective_ends");
    assert_eq!(d1.utc_estimate_ns, Some(0));
    assert_eq!(d1.offset_ns, 18_667, "{d1:?}");
    assert_eq!(d1.matched, 256);
    assert!(d1.residual_ns.unwrap() < 50_000, "{d1:?}");
    // Rank 1 waits for rank 0 at the all-reduces: its NCCL time is larger (117.9 vs 62.4 ms).
    let ranks_rows = &set.cross_rank.ranks;
    assert!(ranks_rows[1].collective_wait_ns > ranks_rows[0].collective_wait_ns);
    // This export records no message sizes: no bandwidth, and the answer says what would record them.
    let ar = |cr: &ranks::CrossRank| {
        cr.collectives
            .iter()
            .find(|c| c.kind == Collective::AllReduce)
            .cloned()
            .unwrap()
    };
    let k = ar(&set.cross_rank);
    assert_eq!(
        (k.sized_instances, k.bytes, k.bus_gb_per_s),
        (0, None, None)
    );
    assert!(
        set.cross_rank
            .notes
            .iter()
            .any(|n| n.contains("--include-blobs=true"))
    );
    // Bus bandwidth arithmetic on the real timings with SYNTHETIC sizes (this capture has none): 64 MiB per
    // all-reduce. algbw = Σ S / Σ transfer after the last arrival; busbw = algbw × 2(n−1)/n = algbw for 2 ranks.
    let mut sized = split.clone();
    for d in &mut sized {
        for c in &mut d.collectives {
            if c.kind == Collective::AllReduce {
                c.bytes = Some(64 << 20);
            }
        }
    }
    let set2 = ranks::merge(&mut sized, set.files.clone(), Vec::new()).unwrap();
    let k = ar(&set2.cross_rank);
    assert_eq!((k.instances, k.sized_instances), (248, 248));
    assert_eq!(k.bytes, Some(248 * (64 << 20)));
    assert_eq!(k.sized_transfer_ns, k.transfer_ns);
    let alg = (248.0 * 67_108_864.0 / k.sized_transfer_ns as f64 * 100.0).round() / 100.0;
    assert_eq!(k.alg_gb_per_s, Some(alg));
    assert_eq!(k.bus_gb_per_s, Some(alg));
}

#[test]
fn digests_round_trip_through_parquet() {
    let tmp = tempfile::tempdir().unwrap();
    let files = split_ddp(&tmp.path().join("set"));
    let (set, d) = digest_set(&files);
    let out = tmp.path().join("digests");
    for x in &d {
        let dir =
            aisp_base::safe_write::Dir::open(&store::digest_dir(&out, &x.identity.file), true)
                .unwrap();
        store::write(&dir, &[x], false).unwrap();
    }
    let mut back = Vec::new();
    for f in store::digest_folders(&out) {
        back.extend(store::read(&f).unwrap());
    }
    let set2 = ranks::merge(&mut back, set.files.clone(), Vec::new()).unwrap();
    assert_eq!(back.len(), d.len());
    for (a, b) in d.iter().zip(&back) {
        same_figures(a, b);
    }
    assert_eq!(
        serde_json::to_string(&set.cross_rank).unwrap(),
        serde_json::to_string(&set2.cross_rank).unwrap()
    );
}

/// A deterministic spread in [-limit, limit].
fn spread(r: usize, salt: u64, limit: i64) -> i64 {
    let mut x = (r as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt;
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    (x % (2 * limit as u64 + 1)) as i64 - limit
}

#[test]
fn sixty_four_ranks_with_skewed_clocks_and_a_straggler() {
    const WORLD: usize = 64;
    const STRAGGLER: usize = 37;
    const DELAY: i64 = 2_000_000;
    let tmp = tempfile::tempdir().unwrap();
    let base = split_ddp(&tmp.path().join("base"));
    // The natural arrivals of the two real ranks, to know what the straggler adds.
    let (_, base_d) = digest_set(&base);
    let arrivals = |d: &RankDigest| -> Vec<i64> {
        d.collectives
            .iter()
            .filter(|c| c.kind == Collective::AllReduce)
            .map(|c| c.start_ns)
            .collect()
    };
    let (a0, a1) = (arrivals(&base_d[0]), arrivals(&base_d[1]));
    // Rank STRAGGLER is a copy of rank 1; it arrives DELAY after its original, and every rank-0 copy
    // arrives at rank 0's time: its lead over the next-latest rank is DELAY + a1 - max(a0, a1).
    let set_dir = tmp.path().join("set");
    std::fs::create_dir_all(&set_dir).unwrap();
    let mut files = Vec::new();
    for r in 0..WORLD {
        let f = set_dir.join(format!("rank_{r}.sqlite"));
        let conn = export_edit::copy_for_edit(&base[r % 2], &f).unwrap();
        export_edit::set_identity(
            &conn,
            r,
            r % 8,
            WORLD,
            Some(&format!("node{}", r / 8)),
            Some((r % 8) as i64),
        )
        .unwrap();
        files.push(f);
    }
    let planted = export_edit::stretch(&files, STRAGGLER, DELAY, "AllReduce").unwrap();
    assert_eq!(planted.collectives, 248);
    // Each rank's session starts up to 20 ms apart, and its utcEpochNs is wrong by up to ±5 ms.
    let mut truth = Vec::new();
    for (r, f) in files.iter().enumerate() {
        let start = if r == 0 { 0 } else { spread(r, 1, 20_000_000) };
        let utc_error = spread(r, 2, 5_000_000);
        let conn = export_edit::open_for_edit(f).unwrap();
        export_edit::shift_in_place(&conn, -start, start + utc_error).unwrap();
        truth.push((start, utc_error));
    }
    let (set, digests) = digest_set(&files);
    assert_eq!(set.identities.len(), WORLD);
    for (r, id) in set.identities.iter().enumerate() {
        assert_eq!(id.rank, r as u32);
        assert_eq!(id.rank_source, "env RANK");
        assert_eq!(
            id.hostname.as_deref(),
            Some(format!("node{}", r / 8).as_str())
        );
    }
    // Offsets within 50 µs of the truth; the utcEpochNs error is found.
    let utc0 = truth[0].1;
    for d in &set.alignment.domains {
        let r = d.ranks[0] as usize;
        let (start, utc_error) = truth[r];
        assert!(
            (d.offset_ns - start).abs() <= 50_000,
            "rank {r}: offset {} vs {start}",
            d.offset_ns
        );
        if r > 0 {
            assert_eq!(d.method, "collective_ends");
            let c = d.correction_ns.unwrap();
            assert!(
                (c + (utc_error - utc0)).abs() <= 50_000,
                "rank {r}: correction {c}"
            );
            assert!(d.residual_ns.unwrap() <= 50_000, "{d:?}");
        }
    }
    // The straggler, how often, and the wait it causes: from the ranks' own kernel durations (the last to
    // arrive has the shortest all-reduce of the instance), over the steady all-reduces only.
    let cr = &set.cross_rank;
    let arr = set.arrivals.as_ref().expect("every rank has a ledger");
    assert_eq!(arr.stragglers, vec![STRAGGLER], "{arr:?}");
    assert_eq!(cr.stragglers.len(), 1, "{:?}", cr.stragglers);
    let s = &cr.stragglers[0];
    assert_eq!(s.rank, STRAGGLER as u32);
    // Steady instances: those whose all-reduce starts inside its rank's steady window on every rank.
    let inside: Vec<usize> = (0..a0.len())
        .filter(|&j| {
            digests.iter().all(|d| {
                let w = &d.ledger.as_ref().unwrap().ledger.steady;
                let t = arrivals(d)[j];
                t >= w.start_ns && t < w.end_ns
            })
        })
        .collect();
    assert_eq!(arr.instances as usize, inside.len());
    assert_eq!(
        s.last_arrivals,
        inside.len(),
        "last at every steady all-reduce: {s:?}"
    );
    let expected_steady: i64 = inside
        .iter()
        .map(|&j| DELAY + a1[j] - a0[j].max(a1[j]))
        .sum();
    let err = (s.lateness_total_ns - expected_steady).abs();
    assert!(
        err <= inside.len() as i64 * 50_000,
        "{} vs {expected_steady}",
        s.lateness_total_ns
    );
    let all_reduce = cr
        .collectives
        .iter()
        .find(|c| c.kind == Collective::AllReduce)
        .unwrap();
    assert_eq!(all_reduce.instances, 248);
    // Its waiting shows on every other rank, not on itself.
    let me = &cr.ranks[STRAGGLER];
    assert!(
        cr.ranks
            .iter()
            .all(|r| r.rank == me.rank || r.collective_wait_ns > me.collective_wait_ns)
    );
    assert!(cr.slow_nodes.is_empty(), "one late rank is not a slow node");
    // Findings, from the ranks' ledgers: the straggler's stake is the others' comm_wait (time in the
    // collectives before it arrived, with no compute beside it), at the median waiting rank; its cause is
    // read from its own ledger against the others' (a copy of rank 1: the same work, so no compute excess
    // is named unless its ledger shows one).
    let f = ranks::ledger_findings(&digests, set.arrivals.as_ref());
    let st = f
        .iter()
        .find(|x| x.id == "cross_rank_straggler")
        .expect("straggler finding");
    assert_eq!(st.time_at_stake_ns, s.exposed_wait_caused_ns);
    assert!(
        st.severity >= aisp_profile::rules::Severity::Medium,
        "{st:?}"
    );
    assert!(
        s.exposed_wait_caused_ns > 0 && s.exposed_wait_caused_ns <= s.exposed_wait_caused_max_ns,
        "{s:?}"
    );
    assert!(st.evidence[0].contains(&format!(
        "rank {STRAGGLER} arrived last at {} of",
        s.last_arrivals
    )));
    names_real_tools(&f);
    // The heat map: 64 ranks × 20 steps.
    let h = cr.heat_map.as_ref().unwrap();
    assert_eq!((h.ranks.len(), h.steps.len()), (WORLD, 20));
}

/// aisp with its own home, execution allowed, a GPU that reports present, and the fake nsys.
fn capture_env() -> (std::sync::Arc<aisp::app::AppState>, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let mut config = aisp::config::Config::with_home(home.path().to_path_buf());
    config.allow_exec = true;
    config.nsys = Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fakes/nsys"));
    let app = aisp::app::AppState::new(config);
    let mut gpu = aisp_hw::gpu::GpuAvailability::unavailable("", false);
    gpu.available = true;
    gpu.reason = None;
    app.set_gpu_for_tests(gpu);
    (app, home)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_rank_capture_runs_nsys_inside_the_launcher_and_analyses_the_set() {
    let (app, _home) = capture_env();
    let tmp = tempfile::tempdir().unwrap();
    // What each rank's nsys export will hold: the DDP fixture's ranks.
    split_ddp(&tmp.path().join("exports"));
    let torchrun = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fakes/torchrun");
    let tool = aisp::registry::find("aisp_profile_nsys").unwrap();
    let out = aisp::dispatch::invoke(
        &app,
        tool,
        serde_json::json!({
            "command": ["sh", "-c", "echo rank $RANK of $WORLD_SIZE"],
            "launcher": [torchrun.display().to_string(), "--nproc_per_node=2"],
            "env": {"FAKE_SQLITE_DIR": tmp.path().join("exports").display().to_string()},
        }),
        aisp::dispatch::CallOptions::default(),
    )
    .await
    .unwrap();
    let run_dir = PathBuf::from(out["run_dir"].as_str().unwrap());
    let pc: Vec<String> = serde_json::from_value(out["profiler_command"].clone()).unwrap();
    assert_eq!(pc[0], torchrun.display().to_string());
    assert_eq!(&pc[1..3], &["--nproc_per_node=2", "--no-python"]);
    assert!(
        pc[3].ends_with("tests/fakes/nsys") && pc[4] == "profile",
        "{pc:?}"
    );
    assert!(pc.contains(&format!(
        "--output={}",
        run_dir.join("rank_%q{RANK}").display()
    )));
    let stdout = out["stdout"]["tail"].to_string();
    assert!(
        stdout.contains("rank 0 of 2") && stdout.contains("rank 1 of 2"),
        "{stdout}"
    );
    for r in 0..2 {
        assert!(run_dir.join(format!("rank_{r}.nsys-rep")).is_file());
        assert!(run_dir.join(format!("rank_{r}.sqlite")).is_file());
        assert_eq!(
            out["artifacts"][format!("sqlite_rank_{r}")],
            run_dir
                .join(format!("rank_{r}.sqlite"))
                .display()
                .to_string()
        );
    }
    let analysis = &out["ranks"]["analysis"];
    let ids = analysis["set"]["identities"].as_array().unwrap();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[1]["rank"], 1);
    assert_eq!(ids[1]["rank_source"], "env RANK");
    assert_eq!(ids[1]["pid"], 641);
    // The fixture's own straggler: rank 0 arrives last at most all-reduces (rank 1 waits 18.3 ms of the
    // steady window for it); rank 0's exposed transfer (31.5 ms, judged on rank 0, the critical path) is
    // the larger stake and comes first.
    let findings = analysis["findings"].as_array().unwrap();
    let st = findings
        .iter()
        .find(|f| f["id"] == "cross_rank_straggler")
        .expect("straggler finding");
    assert_eq!(st["data"]["rank"], 0);
    assert_eq!(out["top_findings"][0]["id"], "communication_not_overlapped");
    assert_eq!(out["top_findings"][0]["data"]["critical_rank"], 0);
    assert!(out["top_findings"][0]["time_at_stake_ns"].as_i64() > st["time_at_stake_ns"].as_i64());
}

#[test]
fn kineto_traces_per_rank_get_the_same_cross_rank_answers() {
    let dir = profile_common::data_dir().join("capture");
    let traces: Vec<aisp_profile::kineto::Trace> = [0, 1]
        .iter()
        .map(|r| {
            aisp_profile::kineto::load(
                &dir.join(format!("ddp.rank{r}.kineto.json.xz")),
                &Default::default(),
            )
            .unwrap()
        })
        .collect();
    assert_eq!(traces[0].base_time_ns, Some(1_790_857_026_000_000_000));
    let mut d: Vec<RankDigest> = traces.iter().flat_map(ranks::digest_trace).collect();
    assert_eq!(d.len(), 2);
    let set = ranks::merge(&mut d, Vec::new(), Vec::new()).unwrap();
    for (r, id) in set.identities.iter().enumerate() {
        assert_eq!(id.rank, r as u32);
        assert_eq!(id.rank_source, "env RANK");
        assert_eq!(id.utc_epoch_ns, Some(1_790_857_026_000_000_000));
    }
    assert_eq!(d[0].steps.len(), 5); // ProfilerStep#7..#11
    let all_reduce = |x: &RankDigest| {
        x.collectives
            .iter()
            .filter(|c| c.kind == Collective::AllReduce)
            .count()
    };
    assert_eq!((all_reduce(&d[0]), all_reduce(&d[1])), (76, 77));
    // These all-reduces are evenly spaced (every 4.52 ms) with equal durations, and the two traces hold
    // 76 and 77 of them: by their ends alone they match about equally well (median absolute deviation
    // 27.8-29.3 µs) at instance shifts 0, 1 and 2, for offsets of 6.80, 2.29 or -2.24 ms. Without the
    // sizes the pairing is unknown: the set is placed by baseTimeNanoseconds only and no skew or
    // straggler is concluded.
    let mut no_sizes = d.clone();
    for x in &mut no_sizes {
        for c in &mut x.collectives {
            c.bytes = None;
        }
    }
    let blind = ranks::merge(&mut no_sizes, Vec::new(), Vec::new()).unwrap();
    let b1 = &blind.alignment.domains[1];
    assert_eq!(b1.method, "ambiguous", "{b1:?}");
    assert_eq!((b1.offset_ns, b1.residual_ns), (0, None));
    assert_eq!(blind.alignment.residual_ns, None);
    assert!(blind.cross_rank.stragglers.is_empty() && blind.cross_rank.collectives.is_empty());
    assert!(
        blind.cross_rank.notes[0].contains("no arrival skew, straggler or wait is concluded"),
        "{:?}",
        blind.cross_rank.notes
    );
    assert!(ranks::findings(&blind.cross_rank).is_empty());
    // The bucket sizes tell the shifts apart: each step all-reduces 16,777,216, then 11 × 16,781,312,
    // then 4,096 floats, and rank 0's first sized bucket is its collective 11 where rank 1's is its 12.
    // Only shift 1 pairs equal sizes; it puts rank 1's GPU clock 2.286 ms behind rank 0's, although
    // both traces carry the same baseTimeNanoseconds (each process converts GPU timestamps itself).
    let d1 = &set.alignment.domains[1];
    assert_eq!(d1.method, "collective_ends", "{d1:?}");
    assert_eq!(
        (d1.seq_shift, d1.offset_ns, d1.residual_ns, d1.matched),
        (1, 2_285_706, Some(60_252), 76)
    );
    // Aligned, the two ranks arrive together: 70 of 76 all-reduces within the clock residual, no rank
    // last more often than chance, and the time is transfer (14 GB/s of bus bandwidth on that run).
    let cr = &set.cross_rank;
    let ar = &cr.collectives[0];
    assert_eq!(
        (ar.kind, ar.instances, ar.below_residual, ar.skew_median_ns),
        (Collective::AllReduce, 76, 70, 28_266)
    );
    assert!((ar.bus_gb_per_s.unwrap() - 14.03).abs() < 1e-9, "{ar:?}");
    assert!(cr.stragglers.is_empty(), "{:?}", cr.stragglers);
    assert!(
        cr.notes.iter().any(|n| n.starts_with("no straggler")),
        "{:?}",
        cr.notes
    );
    // Per-rank figures stand either way.
    assert!(
        cr.ranks
            .iter()
            .all(|r| r.busy_ns > 0 && r.communication_ns > 0)
    );
    assert!(ranks::findings(cr).is_empty());
    // Message sizes: each NCCL kernel whose launch lies inside a record_param_comms op carries its
    // In/Out msg nelems × 4 (Float). Counted independently with Python over the JSON: per rank 55
    // buckets of 16,781,312 floats, 5 of 16,777,216 and 5 of 4,096; the 11 (rank 0) and 12 (rank 1)
    // kernels without a recorded launch call stay unsized.
    for (x, no_size) in d.iter().zip([11, 12]) {
        let mut sizes: std::collections::BTreeMap<Option<i64>, usize> = Default::default();
        for c in &x.collectives {
            *sizes.entry(c.bytes).or_default() += 1;
        }
        let want: std::collections::BTreeMap<Option<i64>, usize> = [
            (None, no_size),
            (Some(16_384), 5),
            (Some(67_108_864), 5),
            (Some(67_125_248), 55),
        ]
        .into_iter()
        .collect();
        assert_eq!(sizes, want, "rank {}", x.identity.rank);
        assert!(x.collectives.iter().all(|c| c.peer.is_none()));
    }
    // No point-to-point transfers: the answer says a slow link cannot be determined, and why.
    assert!(
        cr.link_basis
            .starts_with("slow link: not determinable: no send/recv transfers")
    );
}

/// The sizes `scripts/capture-nccl-sizes.py` used on one H100 (torch.distributed, NCCL 2.28.9, world size 1).
fn script_sizes() -> Vec<(String, i64)> {
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            profile_common::data_dir().join("capture/nccl_sizes_1gpu.manifest.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(m["nccl"], "2.28.9");
    m["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["collective"].as_str().unwrap().to_string(),
                c["bytes"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn nccl_nvtx_payloads_give_the_sizes_the_script_used() {
    use aisp_profile::nccl_payloads::{self, NcclComm};
    let path = fixture("capture/nccl_sizes_1gpu.sqlite");
    let p = aisp_profile::open(&path).unwrap();
    let pl = nccl_payloads::read(&p).unwrap();
    assert!(pl.blobs_exported);
    // ncclCommInitRankConfig's payload: one rank, rank 0, CUDA device 0.
    assert_eq!(
        pl.comms,
        vec![NcclComm {
            comm: 0x6e74_abf4_2a25_547e,
            ranks: Some(1),
            rank: Some(0),
            cuda_device: Some(0)
        }]
    );
    // Every call of the script (2 warm-up steps + 3 profiled), with the bytes it asked for. PyTorch answers
    // a one-rank reduce_scatter_tensor without calling NCCL, so NCCL recorded none.
    let api = |c: &str| match c {
        "all_reduce" => "ncclAllReduce",
        "all_gather" => "ncclAllGather",
        "broadcast" => "ncclBroadcast",
        "all_to_all" => "ncclAlltoAll",
        _ => "none",
    };
    let sizes = script_sizes();
    assert_eq!(sizes.len(), 5);
    for (coll, bytes) in &sizes {
        let calls: Vec<_> = pl.calls.iter().filter(|c| c.api == api(coll)).collect();
        if coll == "reduce_scatter" {
            assert!(calls.is_empty());
            continue;
        }
        assert_eq!(calls.len(), 5, "{coll}");
        for c in calls {
            assert_eq!(c.message_bytes, Some(*bytes), "{coll}");
            assert_eq!(c.size_s(pl.ranks_of(c.comm)), Some(*bytes), "{coll}");
            assert_eq!(c.comm, Some(0x6e74_abf4_2a25_547e));
        }
    }
    assert_eq!(pl.calls.len(), 20);
    assert!(
        pl.calls
            .iter()
            .filter(|c| c.api == "ncclBroadcast")
            .all(|c| c.root == Some(0))
    );
    // The single-export NCCL answer lists them; a one-rank communicator launches no NCCL kernel (it copies),
    // so no kernel carries a size and the answer says so.
    let scope = p.resolve(&aisp_profile::Scope::default()).unwrap();
    let n = aisp_profile::nccl::nccl(&p, &scope).unwrap();
    assert!(n.message_sizes_recorded);
    assert!(n.collectives.is_empty());
    let row = n
        .api_calls
        .iter()
        .find(|a| a.api == "ncclAllReduce")
        .unwrap();
    assert_eq!(
        (
            row.calls,
            row.message_bytes,
            row.min_message_bytes,
            row.max_message_bytes
        ),
        (5, 5 * 4_194_304, 4_194_304, 4_194_304)
    );
    assert_eq!(row.size_s_bytes, Some(5 * 4_194_304));
    assert_eq!(row.matched_to_kernels, 0);
    assert!(
        n.notes
            .iter()
            .any(|x| x.contains("launched no kernel of their own")),
        "{:?}",
        n.notes
    );
    assert_eq!(n.communicators.len(), 1);
}

#[test]
fn nccl_payloads_are_matched_to_the_kernels_that_carry_them() {
    // The same script with one-rank reductions that scale (AVG, PreMulSum 0.5): NCCL then launches its
    // `oneRankReduce` kernel inside the ncclAllReduce call; a plain one-rank sum copies and launches none.
    let path = fixture("capture/nccl_sizes_1gpu_avg.sqlite");
    let p = aisp_profile::open(&path).unwrap();
    let pl = aisp_profile::nccl_payloads::read(&p).unwrap();
    // 2 warm-up + 3 steps of the three all-reduces (float32 × 1,048,576 AVG, bfloat16 × 524,288 PreMulSum,
    // float32 × 262,144 sum: the manifest's bytes).
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            profile_common::data_dir().join("capture/nccl_sizes_1gpu_avg.manifest.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let bytes: Vec<i64> = m["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["bytes"].as_i64().unwrap())
        .collect();
    assert_eq!(bytes, [4_194_304, 1_048_576, 1_048_576]);
    assert_eq!(pl.calls.len(), 15);
    assert!(pl.calls.iter().all(|c| c.api == "ncclAllReduce"));
    let messages = aisp_profile::nccl_payloads::kernel_messages(&p).unwrap();
    let kernels = p.kernels().unwrap();
    // Every oneRankReduce kernel carries exactly one call, of the size of the reduction that launched it.
    let mut got: Vec<i64> = Vec::new();
    for (ki, k) in kernels.iter().enumerate() {
        if p.string(k.short_name) == "oneRankReduce" {
            let msg = messages.get(&(ki as u32)).expect("matched");
            assert_eq!((msg.calls, msg.peer), (1, None));
            got.push(msg.bytes.unwrap());
        }
    }
    assert_eq!(messages.len(), 10);
    got.sort_unstable();
    assert_eq!(got, [vec![1_048_576; 5], vec![4_194_304; 5]].concat());
    // The NCCL answer: sized kernel time with its bandwidth (over kernel time), 10 of 15 calls on a kernel.
    let scope = p.resolve(&aisp_profile::Scope::default()).unwrap();
    let n = aisp_profile::nccl::nccl(&p, &scope).unwrap();
    assert_eq!(n.collectives.len(), 1);
    let row = &n.collectives[0];
    assert_eq!((row.collective, row.count), (Collective::Other, 10));
    assert_eq!(row.bytes, Some(5 * 4_194_304 + 5 * 1_048_576));
    let alg = (row.bytes.unwrap() as f64 / row.total_ns as f64 * 100.0).round() / 100.0;
    assert_eq!(row.algbw_gb_per_s, Some(alg));
    // One rank: the bus factor of "other" is 1.
    assert_eq!(row.busbw_gb_per_s, Some(alg));
    let api = &n.api_calls[0];
    assert_eq!((api.calls, api.matched_to_kernels), (15, 10));
    // The digest of the one rank carries the sizes too.
    let d = digest::digest_profile(&p, &path).unwrap();
    let sized: i64 = d[0].collectives.iter().filter_map(|c| c.bytes).sum();
    assert_eq!(sized, 5 * 4_194_304 + 5 * 1_048_576);
}

#[test]
fn kineto_record_param_comms_give_the_sizes_the_script_used() {
    let t = aisp_profile::kineto::load(
        &profile_common::data_dir().join("capture/nccl_sizes_1gpu.kineto.json.xz"),
        &Default::default(),
    )
    .unwrap();
    let name = |c: &str| match c {
        "all_reduce" => "allreduce",
        "all_gather" => "_allgather_base",
        "broadcast" => "broadcast",
        "reduce_scatter" => "_reduce_scatter_base",
        _ => "all_to_allv",
    };
    // Three profiled steps, each with the script's five calls.
    assert_eq!(t.comms.len(), 15);
    for (coll, bytes) in script_sizes() {
        let ops: Vec<_> = t
            .comms
            .iter()
            .filter(|c| c.collective == name(&coll))
            .collect();
        assert_eq!(ops.len(), 3, "{coll}");
        for c in ops {
            assert_eq!(c.bytes(), Some(bytes), "{coll}");
            assert_eq!(
                (c.group_size, c.group_ranks.as_slice()),
                (Some(1), &[0i64][..])
            );
            assert_eq!(c.peer(), None);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_runs_a_profile_operation_on_every_rank_of_the_set() {
    let (app, _home) = capture_env();
    let tmp = tempfile::tempdir().unwrap();
    split_ddp(tmp.path());
    let dir = tmp.path().display().to_string();
    let call = |tool: &str, args: serde_json::Value| {
        let app = app.clone();
        let tool = aisp::registry::find(tool).unwrap();
        async move { aisp::dispatch::invoke(&app, tool, args, Default::default()).await }
    };
    let out = call(
        "aisp_profile_ranks",
        serde_json::json!({"path": dir, "each": "kernels", "each_args": {"limit": 3}, "detail": true}),
    )
    .await
    .unwrap();
    let each = out["each"].as_array().unwrap();
    assert_eq!(each.len(), 2);
    let identities = out["set"]["identities"].as_array().unwrap();
    for (r, e) in each.iter().enumerate() {
        assert_eq!(e["ranks"], serde_json::json!([r]), "{e}");
        assert!(e["error"].is_null(), "{e}");
        let id = identities.iter().find(|i| i["rank"] == r).unwrap();
        assert_eq!(id["file"], e["file"]);
        // The rank's answer from its own file equals the combined export's answer for its device.
        let combined = call(
            "aisp_profile_kernels",
            serde_json::json!({"path": fixture("ddp.sqlite").display().to_string(),
                "device": id["device"], "limit": 3}),
        )
        .await
        .unwrap();
        let answer = &e["answer"];
        for key in ["kernels", "total_ns", "rows_total"] {
            assert_eq!(answer[key], combined[key], "rank {r} {key}");
        }
        assert_eq!(
            answer["rows"][0]["total_ns"],
            combined["rows"][0]["total_ns"]
        );
    }
    // Rank 1 ran 3,592 kernels for 239.38 ms (independent SQL on ddp.sqlite, deviceId 1).
    assert_eq!(each[1]["answer"]["kernels"], 3592);
    assert_eq!(each[1]["answer"]["total_ns"], 239_383_895_i64);

    // A single-export operation given the folder says how to ask every rank.
    let err = call("aisp_profile_kernels", serde_json::json!({"path": dir}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, aisp::ErrorKind::InvalidInput);
    assert!(err.hint.contains("\"each\": \"kernels\""), "{}", err.hint);
    // `each` names read-only profile operations only.
    for bad in ["nsys", "export", "ranks", "no_such_op"] {
        let err = call(
            "aisp_profile_ranks",
            serde_json::json!({"path": dir, "each": bad}),
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind, aisp::ErrorKind::InvalidInput, "{bad}");
    }
}

#[test]
fn a_slow_node_is_named_when_all_its_ranks_arrive_late() {
    // 16 ranks on two hosts; every rank of node1 arrives ~2 ms late at each all-reduce (a slow host,
    // not one slow rank). Clocks shifted as in the 64-rank test.
    const WORLD: usize = 16;
    const DELAY: i64 = 2_000_000;
    let tmp = tempfile::tempdir().unwrap();
    let base = split_ddp(&tmp.path().join("base"));
    let set_dir = tmp.path().join("set");
    std::fs::create_dir_all(&set_dir).unwrap();
    let mut files = Vec::new();
    for r in 0..WORLD {
        let f = set_dir.join(format!("rank_{r}.sqlite"));
        let conn = export_edit::copy_for_edit(&base[r % 2], &f).unwrap();
        let host = format!("node{}", r / 8);
        export_edit::set_identity(&conn, r, r % 8, WORLD, Some(&host), Some((r % 8) as i64))
            .unwrap();
        files.push(f);
    }
    for r in 8..WORLD {
        // Slightly different per rank, so that which of the host's ranks is last varies.
        export_edit::stretch(&files, r, DELAY + (r as i64 - 8) * 1_000, "AllReduce").unwrap();
    }
    for (r, f) in files.iter().enumerate().skip(1) {
        let conn = export_edit::open_for_edit(f).unwrap();
        let start = spread(r, 3, 20_000_000);
        export_edit::shift_in_place(&conn, -start, start + spread(r, 4, 5_000_000)).unwrap();
    }
    let (set, digests) = digest_set(&files);
    let cr = &set.cross_rank;
    assert_eq!(cr.slow_nodes.len(), 1, "{:?}", cr.slow_nodes);
    let node = &cr.slow_nodes[0];
    assert_eq!(node.hostname, "node1");
    assert_eq!(node.ranks, (8..16).collect::<Vec<u32>>());
    assert_eq!(node.rank_share_pct, 50.0);
    // (98.4 %: at a few all-reduces the two real ranks differ by more than the planted delay.)
    assert!(node.last_arrival_share_pct >= 95.0, "{node:?}");
    // Its lateness: the host's last rank leads the other host by about DELAY (+ up to 7 µs, + the
    // natural difference of the two real ranks) at each of the 248 all-reduces.
    let per_instance = node.lateness_total_ns / 248;
    assert!(
        (DELAY - 100_000..DELAY + 1_000_000).contains(&per_instance),
        "{per_instance}"
    );
    // No rank of the other host is named; a rank of node1 may be last among its host's ranks often (the
    // stretches differ by 1 µs a rank), but fixing it alone would save the others only its lead over the
    // next-latest rank of its host: microseconds, not the host's milliseconds.
    for s in &cr.stragglers {
        assert!(s.rank >= 8, "{s:?}");
        assert!(s.exposed_wait_caused_ns <= s.lateness_total_ns, "{s:?}");
        assert!(s.lateness_median_ns < 10_000, "{s:?}");
    }
    let per_rank = ranks::set_findings(&set, &digests);
    for st in per_rank.iter().filter(|x| x.id == "cross_rank_straggler") {
        assert!(st.severity <= aisp_profile::rules::Severity::Low, "{st:?}");
    }
    // The finding names the host and its ranks, at stake the part of their lead another host's device
    // spent idle, with the numbers of the data.
    let f = ranks::findings(cr);
    names_real_tools(&f);
    let slow = f
        .iter()
        .find(|x| x.id == "cross_rank_slow_node")
        .expect("slow-node finding");
    assert_eq!(slow.title, "Host node1 holds the late ranks");
    assert_eq!(slow.time_at_stake_ns, node.exposed_wait_caused_ns);
    assert!(
        node.exposed_wait_caused_ns > 0 && node.exposed_wait_caused_ns <= node.lateness_total_ns,
        "{node:?}"
    );
    assert!(
        slow.evidence[0].starts_with(&format!(
            "ranks [8, 9, 10, 11, 12, 13, 14, 15] on node1 (50.0 % of the ranks) arrived after every other host's ranks at {:.1} % of the collectives",
            node.last_arrival_share_pct
        )),
        "{}",
        slow.evidence[0]
    );
}

/// One rank's all-reduce kernels (start, end) and its session start, read with plain SQL.
fn sql_all_reduces(path: &Path) -> (i64, Vec<(i64, i64)>) {
    let c = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    let utc: i64 = c
        .query_row(
            "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let mut st = c
        .prepare(
            "SELECT k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds n ON n.id = k.shortName \
             WHERE n.value LIKE '%AllReduce%' ORDER BY k.start",
        )
        .unwrap();
    let rows = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    (utc, rows)
}

fn median_of(mut v: Vec<i64>) -> i64 {
    v.sort_unstable();
    v[(v.len() - 1) / 2]
}

/// Issue 25's capture: `workloads/ddp.py` on two H100s (NVLink NV18) through aisp_profile_nsys's per-rank
/// mode (torchrun --no-python nsys ... per rank), plain and with rank 1 spinning its GPU 1 ms before each
/// DDP bucket's all-reduce (a communication hook; `manifest.rank1.json` holds the calibrated spin). The
/// figures are checked against SQL over the same files and against the sizes the model implies.
#[test]
fn two_h100s_per_rank_exports_name_the_planted_straggler() {
    let dir = |set: &str| {
        let f0 = fixture(&format!("capture/ranks2/{set}/rank_0.sqlite"));
        let f1 = fixture(&format!("capture/ranks2/{set}/rank_1.sqlite"));
        assert_eq!(f0.parent(), f1.parent());
        vec![f0, f1]
    };
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            profile_common::data_dir().join("capture/ranks2/straggler/manifest.rank1.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["straggle_ms"], 1.0);
    // 13 buckets a step after DDP's first iteration (one then): 19 × 13 + 1 delayed all-reduces.
    let hooked: i64 = manifest["allreduce_hook_calls_per_step"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .sum();
    assert_eq!(hooked, 248);
    for set in ["plain", "straggler"] {
        let files = dir(set);
        let (s, digests) = digest_set(&files);
        let (u0, k0) = sql_all_reduces(&files[0]);
        let (u1, k1) = sql_all_reduces(&files[1]);
        assert_eq!((k0.len(), k1.len()), (248, 248));
        // Identity from each capture's environment: RANK 0 and 1 on CUDA devices 0 and 1 of one host.
        for (r, id) in s.identities.iter().enumerate() {
            assert_eq!(
                (id.rank, id.device, id.rank_source.as_str()),
                (r as u32, r as i64, "env RANK")
            );
            assert_eq!(id.gpu.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        }
        // Clocks: the session starts give the first estimate; the all-reduce ends (which a two-rank ring
        // finishes together) correct it by tens of µs. SQL over the all-reduces alone agrees within 5 µs.
        let d1 = &s.alignment.domains[1];
        assert_eq!(d1.utc_estimate_ns, Some(u1 - u0));
        let sql_correction = -median_of(
            k0.iter()
                .zip(&k1)
                .map(|(a, b)| b.1 + (u1 - u0) - a.1)
                .collect(),
        );
        let c = d1.correction_ns.unwrap();
        assert!(
            (c - sql_correction).abs() < 5_000,
            "{c} vs SQL {sql_correction}"
        );
        assert!(
            c.abs() < 50_000 && d1.residual_ns.unwrap() < 60_000,
            "{d1:?}"
        );
        assert_eq!((d1.matched, d1.seq_shift), (256, 0));
        // NCCL's NVTX payloads (exported with --include-blobs) size every all-reduce: DDP reduces all
        // 12 × (4096² + 4096) fp32 parameters once per step, 20 steps.
        let cr = &s.cross_rank;
        let ar = cr
            .collectives
            .iter()
            .find(|c| c.kind == Collective::AllReduce)
            .unwrap();
        assert_eq!(ar.instances, 248);
        assert_eq!(ar.sized_instances, 248);
        assert_eq!(ar.bytes, Some(20 * 4 * 12 * (4096 * 4096 + 4096)));
        // Bus bandwidth of these ~65 MB all-reduces next to aisp_hw_nccl's sweep on the same GPUs in the
        // same call: 236 GB/s in the training step against 264 GB/s at 64 MiB alone.
        let hw: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(
                profile_common::data_dir().join("capture/ranks2/hw_nccl.json"),
            )
            .unwrap(),
        )
        .unwrap();
        let at_64mib = hw["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["bytes"] == 67_108_864)
            .unwrap()["busbw_gb_per_s"]
            .as_f64()
            .unwrap();
        let bus = ar.bus_gb_per_s.unwrap();
        assert!(
            (0.8 * at_64mib..=1.02 * at_64mib).contains(&bus),
            "{bus} vs {at_64mib}"
        );
        // Who arrives last, from SQL: in a two-rank all-reduce the rank that arrives last waits least, so
        // its kernel is the shorter one; counted over the steady all-reduces (those starting inside both
        // ranks' steady windows) where the two durations differ by at least DECIDED_NS.
        let steady: Vec<(i64, i64)> = digests
            .iter()
            .map(|d| {
                let w = &d
                    .ledger
                    .as_ref()
                    .expect("nsys ranks have a ledger")
                    .ledger
                    .steady;
                (w.start_ns, w.end_ns)
            })
            .collect();
        let inside = |w: (i64, i64), k: &(i64, i64)| k.0 >= w.0 && k.0 < w.1;
        let pairs: Vec<(i64, i64)> = k0
            .iter()
            .zip(&k1)
            .filter(|(a, b)| inside(steady[0], a) && inside(steady[1], b))
            .map(|(a, b)| (a.1 - a.0, b.1 - b.0))
            .collect();
        let arr = s.arrivals.as_ref().expect("both ranks have a ledger");
        assert_eq!(arr.instances as usize, pairs.len());
        let rank1_leads: Vec<i64> = pairs
            .iter()
            .filter(|(d0, d1)| d0 - d1 >= aisp_profile::ledger::DECIDED_NS)
            .map(|(d0, d1)| d0 - d1)
            .collect();
        let rank0_last = pairs
            .iter()
            .filter(|(d0, d1)| d1 - d0 >= aisp_profile::ledger::DECIDED_NS)
            .count();
        assert_eq!(arr.last, vec![rank0_last as u64, rank1_leads.len() as u64]);
        assert_eq!(cr.stragglers.len(), 1, "{:?}", cr.stragglers);
        let st = &cr.stragglers[0];
        assert_eq!(st.rank, 1);
        assert_eq!(st.last_arrivals, rank1_leads.len());
        assert_eq!(st.lateness_total_ns, rank1_leads.iter().sum::<i64>());
        assert_eq!(st.lateness_median_ns, {
            let mut l = rank1_leads.clone();
            l.sort_unstable();
            l[l.len() / 2]
        });
        let f = ranks::ledger_findings(&digests, Some(arr));
        names_real_tools(&f);
        let finding = f.iter().find(|x| x.id == "cross_rank_straggler").unwrap();
        // Two ranks: the wait rank 1 causes is rank 0's comm_wait (the part of its all-reduces before rank
        // 1 arrived with no compute beside it), at most rank 0's whole wait.
        assert_eq!(finding.time_at_stake_ns, st.exposed_wait_caused_ns);
        assert!(
            st.exposed_wait_caused_ns <= arr.wait_ns[0],
            "{st:?} {arr:?}"
        );
        if set == "straggler" {
            // Last at every steady delayed all-reduce, by the planted millisecond (plus its own pace).
            assert_eq!(st.last_arrivals, pairs.len());
            assert!(
                (1_000_000..1_200_000).contains(&st.lateness_median_ns),
                "{st:?}"
            );
            assert_eq!(finding.severity, aisp_profile::rules::Severity::Critical);
        } else {
            // Without the spin rank 1 is still last more often than chance (host-bound: its GPU waits for
            // launches), by about an eighth of a millisecond (126 µs): a real straggler, smaller.
            assert!(
                st.last_arrivals as f64 > arr.chance_limit && st.last_arrivals < pairs.len(),
                "{st:?} {arr:?}"
            );
            assert!(
                (100_000..150_000).contains(&st.lateness_median_ns),
                "{st:?}"
            );
            assert!(
                finding.severity < aisp_profile::rules::Severity::Critical,
                "{finding:?}"
            );
        }
    }
}

/// The same run's torch.profiler traces (aisp_profile_torch under torchrun, one per rank): the straggler
/// is named from Kineto too; in the plain run each rank is last about half the time and none is named.
#[test]
fn two_h100s_kineto_traces_name_the_straggler_and_not_a_coin_toss() {
    let load = |set: &str| -> Vec<RankDigest> {
        (0..2)
            .flat_map(|r| {
                let t = aisp_profile::kineto::load(
                    &profile_common::data_dir()
                        .join(format!("capture/ranks2/{set}/trace.rank{r}.json.xz")),
                    &Default::default(),
                )
                .unwrap();
                ranks::digest_trace(&t)
            })
            .collect()
    };
    let mut d = load("torch_straggler");
    let s = ranks::merge(&mut d, Vec::new(), Vec::new()).unwrap();
    // Evenly spaced buckets (one per 1.39 ms) match several instance shifts by their ends alone; the
    // bucket sizes pick one, and it puts the two processes' clocks 30 µs apart.
    let d1 = &s.alignment.domains[1];
    assert_eq!(
        (d1.method.as_str(), d1.seq_shift),
        ("collective_ends", 1),
        "{d1:?}"
    );
    assert!(d1.offset_ns.abs() < 100_000, "{d1:?}");
    let st = &s.cross_rank.stragglers;
    assert_eq!(st.len(), 1);
    assert_eq!(st[0].rank, 1);
    assert_eq!(st[0].last_arrivals, st[0].of_instances);
    assert!(
        (1_000_000..1_200_000).contains(&st[0].lateness_median_ns),
        "{:?}",
        st[0]
    );
    let mut d = load("torch_plain");
    let s = ranks::merge(&mut d, Vec::new(), Vec::new()).unwrap();
    let cr = &s.cross_rank;
    let lasts: Vec<usize> = cr.ranks.iter().map(|r| r.last_arrivals).collect();
    assert_eq!(lasts, vec![33, 32]);
    assert!(cr.stragglers.is_empty(), "{:?}", cr.stragglers);
    assert!(
        cr.notes
            .iter()
            .any(|n| n.starts_with("no straggler: no rank was last more often than chance")),
        "{:?}",
        cr.notes
    );
}

/// A default set answer gives each collective kind in one line, with the figures of the detailed rows: heldout12's
/// `lm_ddp` (2 H200s, `NCCL_P2P_DISABLE=1`) all-reduces 37.77 GB in 476 sized calls at 26.6 GB/s of bus bandwidth.
#[test]
fn a_default_set_answer_states_each_collective_kind_in_one_line() {
    let mut dir = None;
    for r in 0..2 {
        dir = fixture(&format!("planted/heldout12/lm_ddp/rank{r}.sqlite"))
            .parent()
            .map(Path::to_path_buf);
    }
    let path = dir.unwrap().display().to_string();
    let t = aisp::registry::find("aisp_profile_ranks").unwrap();
    let call = |args: serde_json::Value| {
        t.op.call_json(
            &aisp::context::OpContext::detached(aisp::app::AppState::for_tests()),
            args,
        )
        .unwrap()
    };
    let lean = call(serde_json::json!({"path": path}));
    let full = call(serde_json::json!({"path": path, "detail": true}));
    let rows: Vec<&serde_json::Value> = full["set"]["cross_rank"]["collectives"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["instances"].as_u64().unwrap() > 1)
        .collect();
    let lines = lean["collectives"].as_array().unwrap();
    assert_eq!(lines.len(), rows.len(), "{lines:?}");
    for (line, row) in lines.iter().zip(&rows) {
        let line = line.as_str().unwrap();
        let kind = row["kind"].as_str().unwrap();
        assert!(
            line.starts_with(&format!(
                "{kind}: {} calls, {}% waiting for the last rank",
                row["instances"], row["skew_share_pct"]
            )),
            "{line} / {row}"
        );
        if let Some(bw) = row["bus_gb_per_s"]
            .as_f64()
            .filter(|_| row["sized_instances"] != 0)
        {
            assert!(line.ends_with(&format!("at {bw:.1} GB/s bus")), "{line}");
        }
    }
    let ar = lines
        .iter()
        .find_map(|l| l.as_str().filter(|l| l.starts_with("all_reduce:")))
        .unwrap();
    assert!(ar.ends_with("476 sized: 37.77 GB at 26.6 GB/s bus"), "{ar}");
    assert!(
        lean["set"]["cross_rank"].get("collectives").is_none(),
        "{lean}"
    );
}
