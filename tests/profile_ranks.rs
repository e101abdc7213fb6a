//! Cross-rank analysis on real data: the two-GPU DDP export split per rank
//! (with the dev tool `examples/export_edit.rs`, included as a module) gives
//! the same per-rank figures as the combined export; a 64-rank set made from
//! its ranks with shifted clocks, wrong session starts and a planted
//! straggler recovers the offsets and names the straggler and its cost.

mod profile_common;

#[path = "../examples/export_edit.rs"]
mod export_edit;

use std::path::{Path, PathBuf};

use aisp::profile::nccl::Collective;
use aisp::profile::ranks::{self, RankDigest, digest, store};
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

/// Everything but where the rank was read from.
fn figures(d: &RankDigest) -> String {
    let mut d = d.clone();
    d.identity.file = String::new();
    d.identity.rank_source = String::new();
    d.identity.env_rank = None;
    d.identity.local_rank = None;
    d.identity.world_size = None;
    d.identity.rank = 0;
    serde_json::to_string(&d).unwrap()
}

/// Every tool a finding's texts send the reader to exists (`aisp_system_*` names a domain).
fn names_real_tools(findings: &[aisp::profile::rules::Finding]) {
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
    let files = split_ddp(tmp.path());
    assert_eq!(files.len(), 2);
    // The combined export: two ranks, read from one file.
    let combined_path = fixture("ddp.sqlite");
    let p = aisp::profile::open(&combined_path).unwrap();
    let combined = digest::digest_profile(&p, &combined_path).unwrap();
    assert_eq!(combined.len(), 2);
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
        assert_eq!(figures(a), figures(b), "rank {}", b.identity.rank);
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
    // Busy % of the steady window: 82.77 / 96.42.
    let pct = |d: &RankDigest| {
        let w = d.window("steady").unwrap();
        (w.busy_ns as f64 * 10000.0 / w.window.length_ns as f64).round() / 100.0
    };
    assert_eq!(pct(&split[0]), 82.77);
    assert_eq!(pct(&split[1]), 96.42);
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
        store::write(&store::digest_dir(&out, &x.identity.file), &[x]).unwrap();
    }
    let mut back = Vec::new();
    for f in store::digest_folders(&out) {
        back.extend(store::read(&f).unwrap());
    }
    let set2 = ranks::merge(&mut back, set.files.clone(), Vec::new()).unwrap();
    assert_eq!(back.len(), d.len());
    for (a, b) in d.iter().zip(&back) {
        assert_eq!(figures(a), figures(b));
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
    let expected_lateness: i64 = a0
        .iter()
        .zip(&a1)
        .map(|(x0, x1)| DELAY + x1 - x0.max(x1))
        .sum();
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
    let (set, _) = digest_set(&files);
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
    // The straggler, how often, and the wait it causes.
    let cr = &set.cross_rank;
    assert_eq!(cr.stragglers.len(), 1, "{:?}", cr.stragglers);
    let s = &cr.stragglers[0];
    assert_eq!(s.rank, STRAGGLER as u32);
    assert!(s.last_arrivals >= 240, "{s:?}");
    // Each instance's lateness is exact up to the two ranks' alignment errors (≤ 50 µs each).
    let err = (s.lateness_total_ns - expected_lateness).abs();
    assert!(
        err <= 248 * 50_000,
        "{} vs {expected_lateness}",
        s.lateness_total_ns
    );
    assert!(s.wait_caused_ns >= (WORLD as i64 - 1) * s.lateness_total_ns);
    let all_reduce = cr
        .collectives
        .iter()
        .find(|c| c.kind == Collective::AllReduce)
        .unwrap();
    assert_eq!(all_reduce.instances, 248);
    assert!(all_reduce.skew_share_pct > 50.0, "{all_reduce:?}");
    // Its waiting shows on every other rank, not on itself.
    let me = &cr.ranks[STRAGGLER];
    assert_eq!(me.last_arrivals, s.last_arrivals);
    assert!(
        cr.ranks
            .iter()
            .all(|r| r.rank == me.rank || r.collective_wait_ns > me.collective_wait_ns)
    );
    assert!(cr.slow_nodes.is_empty(), "one late rank is not a slow node");
    // Findings: the straggler first, its time at stake the lateness; each sentence carries the numbers.
    let f = ranks::findings::findings(cr);
    assert_eq!(f[0].id, "cross_rank_straggler");
    assert_eq!(f[0].time_at_stake_ns, s.lateness_total_ns);
    assert!(f[0].evidence[0].contains(&format!(
        "rank {STRAGGLER} arrived last at {} of",
        s.last_arrivals
    )));
    assert!(f.iter().any(|x| x.id == "cross_rank_skew_dominated"));
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
    let mut gpu = aisp::gpu::GpuAvailability::unavailable("", false);
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
    // The fixture's own straggler: rank 0 arrives last at most all-reduces.
    assert_eq!(out["top_findings"][0]["id"], "cross_rank_straggler");
    assert_eq!(analysis["findings"][0]["data"]["rank"], 0);
}

#[test]
fn kineto_traces_per_rank_get_the_same_cross_rank_answers() {
    let dir = profile_common::data_dir().join("capture");
    let traces: Vec<aisp::kineto::Trace> = [0, 1]
        .iter()
        .map(|r| {
            aisp::kineto::load(
                &dir.join(format!("ddp.rank{r}.kineto.json.xz")),
                &Default::default(),
            )
            .unwrap()
        })
        .collect();
    assert_eq!(traces[0].base_time_ns, Some(1_790_857_026_000_000_000));
    let mut d: Vec<RankDigest> = traces
        .iter()
        .flat_map(ranks::kineto::digest_trace)
        .collect();
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
    // 76 and 77 of them: their ends match about equally well (median absolute deviation 27.8-29.3 µs) at
    // instance shifts 0, 1 and 2, for offsets of 6.80, 2.29 or -2.24 ms. The pairing is unknown, so
    // the set is placed by baseTimeNanoseconds only and no skew or straggler is concluded.
    let d1 = &set.alignment.domains[1];
    assert_eq!(d1.method, "ambiguous", "{d1:?}");
    assert_eq!((d1.offset_ns, d1.residual_ns), (0, None));
    assert_eq!(set.alignment.residual_ns, None);
    let cr = &set.cross_rank;
    assert!(cr.stragglers.is_empty() && cr.collectives.is_empty());
    assert!(
        cr.notes[0].contains("no arrival skew, straggler or wait is concluded"),
        "{:?}",
        cr.notes
    );
    // Per-rank figures still stand.
    assert!(
        cr.ranks
            .iter()
            .all(|r| r.busy_ns > 0 && r.communication_ns > 0)
    );
    assert!(ranks::findings::findings(cr).is_empty());
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
            .starts_with("slow link: not determinable: ring/tree collectives name no hop")
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
    use aisp::profile::nccl_payloads::{self, NcclComm};
    let path = fixture("capture/nccl_sizes_1gpu.sqlite");
    let p = aisp::profile::open(&path).unwrap();
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
    let scope = p.resolve(&aisp::profile::Scope::default()).unwrap();
    let n = aisp::profile::nccl::nccl(&p, &scope).unwrap();
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
    let p = aisp::profile::open(&path).unwrap();
    let pl = aisp::profile::nccl_payloads::read(&p).unwrap();
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
    let messages = aisp::profile::nccl_payloads::kernel_messages(&p).unwrap();
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
    let scope = p.resolve(&aisp::profile::Scope::default()).unwrap();
    let n = aisp::profile::nccl::nccl(&p, &scope).unwrap();
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
    let t = aisp::kineto::load(
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
        serde_json::json!({"path": dir, "each": "kernels", "each_args": {"limit": 3}}),
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
    let (set, _) = digest_set(&files);
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
    // No single rank of the host leads the others by more than the clock residual: the per-rank
    // straggler count does not see a slow host.
    assert!(
        cr.stragglers.iter().all(|s| s.rank < 8),
        "{:?}",
        cr.stragglers
    );
    // The finding names the host and its ranks, at stake their summed lateness, with the numbers of the data.
    let f = ranks::findings::findings(cr);
    names_real_tools(&f);
    let slow = f
        .iter()
        .find(|x| x.id == "cross_rank_slow_node")
        .expect("slow-node finding");
    assert_eq!(slow.title, "Host node1 holds the late ranks");
    assert_eq!(slow.time_at_stake_ns, node.lateness_total_ns);
    assert!(
        slow.evidence[0].starts_with(&format!(
            "ranks [8, 9, 10, 11, 12, 13, 14, 15] on node1 (50.0 % of the ranks) arrived after every other host's ranks at {:.1} % of the collectives",
            node.last_arrival_share_pct
        )),
        "{}",
        slow.evidence[0]
    );
}
