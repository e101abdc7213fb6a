//! A report of a set of exports analysed as one run (`profile::ranks`): the
//! cross-rank findings, each rank's identity, clock and figures, arrival skew
//! versus transfer per collective, and the rank × step heat map.

use super::profile::finding_block;
use super::{Block, Report, Section, Table, common_facts, ms};
use crate::chart::build;
use aisp_profile::ranks::RankSet;
use aisp_profile::rules::Finding;

fn file_name(path: &str) -> String {
    std::path::Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(path)
        .to_string()
}

fn opt_ms(v: Option<i64>) -> String {
    v.map(ms).unwrap_or_else(|| "–".into())
}

/// The report of a rank set and its cross-rank findings.
pub fn ranks_report(path: &str, set: &RankSet, findings: &[Finding]) -> Report {
    let cr = &set.cross_rank;
    let mut facts = vec![
        ("Set".to_string(), path.to_string()),
        ("Exports".to_string(), set.files.len().to_string()),
        ("Ranks".to_string(), set.identities.len().to_string()),
        (
            "Clock residual".to_string(),
            set.alignment
                .residual_ns
                .map(|r| format!("{} (nothing finer is concluded)", ms(r)))
                .unwrap_or_else(|| "not aligned by collectives".into()),
        ),
    ];
    if !set.skipped.is_empty() {
        facts.push(("Skipped".into(), set.skipped.len().to_string()));
    }
    facts.extend(common_facts());
    let mut sections = Vec::new();

    let mut f = Section::new("Cross-rank findings");
    if findings.is_empty() {
        f.para("No straggler, skew-dominated collective or slow node above the clock residual.");
    }
    for x in findings {
        f.blocks.push(Block::Finding(finding_block(x)));
    }
    sections.push(f);

    let mut r = Section::new("Ranks");
    let mut t = Table::new(&[
        ("rank", true),
        ("host", false),
        ("device", true),
        ("file", false),
        ("clock offset ms", true),
        ("step median ms", true),
        ("busy %", true),
        ("exposed comm. ms", true),
        ("waiting at collectives ms", true),
        ("last arrivals", true),
    ]);
    for row in &cr.ranks {
        t.row(vec![
            row.rank.to_string(),
            row.hostname.clone().unwrap_or_else(|| "–".into()),
            row.device.to_string(),
            file_name(&row.file),
            ms(row.offset_ns),
            opt_ms(row.step_median_ns),
            format!("{:.2}", row.busy_pct),
            ms(row.exposed_communication_ns),
            ms(row.collective_wait_ns),
            row.last_arrivals.to_string(),
        ]);
    }
    r.table(t);
    r.note(format!(
        "Ranks from {} (see the identities of the answer); figures over each rank's steady window (else its span). \
         Clock offsets: session start (utcEpochNs) refined by matching the ends of the same collective instances.",
        set.identities
            .first()
            .map(|i| i.rank_source.as_str())
            .unwrap_or("–")
    ));
    sections.push(r);

    if !cr.collectives.is_empty() {
        let mut c = Section::new("Collectives: waiting for the last rank vs moving data");
        let mut t = Table::new(&[
            ("collective", false),
            ("instances", true),
            ("wait per device ms", true),
            ("transfer ms", true),
            ("skew share %", true),
            ("skew median ms", true),
            ("sized instances", true),
            ("algbw GB/s", true),
            ("busbw GB/s", true),
        ]);
        for k in &cr.collectives {
            t.row(vec![
                format!("{:?}", k.kind),
                k.instances.to_string(),
                ms(k.wait_per_device_ns),
                ms(k.transfer_ns),
                format!("{:.1}", k.skew_share_pct),
                ms(k.skew_median_ns),
                k.sized_instances.to_string(),
                k.alg_gb_per_s
                    .map(|b| format!("{b:.1}"))
                    .unwrap_or_else(|| "–".into()),
                k.bus_gb_per_s
                    .map(|b| format!("{b:.1}"))
                    .unwrap_or_else(|| "–".into()),
            ]);
        }
        c.table(t);
        c.note(
            "Bandwidth over transfer time only (after the last rank arrived), nccl-tests' definitions with n = the \
             ranks of the set.",
        );
        for n in &cr.notes {
            c.note(n.clone());
        }
        if cr.links.is_empty() {
            c.note(cr.link_basis.clone());
        }
        sections.push(c);
    }

    if !cr.links.is_empty() {
        let mut l = Section::new("Point-to-point links");
        let mut t = Table::new(&[
            ("sender", true),
            ("receiver", true),
            ("transfers", true),
            ("both ends seen", true),
            ("bytes", true),
            ("transfer ms", true),
            ("GB/s", true),
        ]);
        for row in &cr.links {
            t.row(vec![
                row.src.to_string(),
                row.dst.to_string(),
                row.instances.to_string(),
                row.both_ends.to_string(),
                row.bytes.to_string(),
                ms(row.transfer_ns),
                format!("{:.2}", row.gb_per_s),
            ]);
        }
        l.table(t);
        l.note(cr.link_basis.clone());
        sections.push(l);
    }

    if let Some(h) = &cr.heat_map {
        let mut s = Section::new("Step time per rank");
        let rows: Vec<String> = h.ranks.iter().map(|r| format!("rank {r}")).collect();
        let values: Vec<Vec<Option<f64>>> = h
            .values
            .iter()
            .map(|row| row.iter().map(|v| v.map(|ns| ns as f64 / 1e6)).collect())
            .collect();
        let what = if h.figure == "cpu_ns" {
            "CPU step time"
        } else {
            "GPU-projected step time"
        };
        s.chart(build::heat_map(
            &format!("{what} per rank and step (ms)"),
            &rows,
            &h.steps,
            &values,
            "ms",
        ));
        if h.truncated {
            s.note(
                "Rows or columns were left out to keep the map readable (the answer says which).",
            );
        }
        sections.push(s);
    }

    let headline = match findings.first() {
        Some(f) => format!(
            "{} ({:.1} % of the median rank's window at stake)",
            f.title, f.share_pct
        ),
        None => "No cross-rank problem above the clock residual".into(),
    };
    Report {
        title: format!(
            "Cross-rank report: {}",
            file_name(path.trim_end_matches('/'))
        ),
        subtitle: format!(
            "{} Nsight Systems exports analysed as one run by aisp",
            set.files.len()
        ),
        facts,
        headline,
        sections,
    }
}
