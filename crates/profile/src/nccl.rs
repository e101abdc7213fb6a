//! `nccl`: communication kernels per device and stream by collective, with
//! counts and times, algorithm and bus bandwidth (nccl-tests definitions) when
//! message sizes are known, and rank imbalance.
//!
//! A kernel is NCCL when its short name contains `nccl` (case-insensitive), or is
//! NCCL's one-rank reduction `oneRankReduce`;
//! the collective is the first of AllGather, ReduceScatter, AllReduce,
//! Broadcast, SendRecv, Send, Recv, AllToAll, Reduce found in the name.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::stats::{self, pct1};
use super::{Profile, ResolvedScope, Result, model};

/// Indices of the payload calls some NCCL kernel carries.
fn messages_calls(
    p: &Profile,
    payloads: &super::nccl_payloads::NcclPayloads,
) -> Result<std::collections::HashSet<usize>> {
    Ok(super::nccl_payloads::matched_calls(p, payloads)?
        .into_values()
        .flatten()
        .collect())
}

pub fn is_nccl(short_name: &str) -> bool {
    (short_name.len() >= 4 && short_name.to_ascii_lowercase().contains("nccl"))
        // NCCL's kernel for a reduction with scaling (AVG, PreMulSum) on a one-rank communicator.
        || short_name == ONE_RANK_REDUCE
}

/// The short name of NCCL's one-rank reduction kernel (`enqueue.cc`: `ncclLaunchOneRank`).
pub const ONE_RANK_REDUCE: &str = "oneRankReduce";

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    AllGather,
    ReduceScatter,
    AllReduce,
    Broadcast,
    SendRecv,
    Send,
    Recv,
    AllToAll,
    Reduce,
    Other,
}

impl Collective {
    pub fn of(short_name: &str) -> Collective {
        // One rank's reduction serves any reducing collective: which one is in NCCL's payload, not the name.
        if short_name == ONE_RANK_REDUCE {
            return Collective::Other;
        }
        const ORDER: &[(&str, Collective)] = &[
            ("AllGather", Collective::AllGather),
            ("ReduceScatter", Collective::ReduceScatter),
            ("AllReduce", Collective::AllReduce),
            ("Broadcast", Collective::Broadcast),
            ("SendRecv", Collective::SendRecv),
            ("AllToAll", Collective::AllToAll),
            ("Send", Collective::Send),
            ("Recv", Collective::Recv),
            ("Reduce", Collective::Reduce),
        ];
        ORDER
            .iter()
            .find(|(n, _)| short_name.contains(n))
            .map(|(_, c)| *c)
            .unwrap_or(Collective::Other)
    }

    /// busbw / algbw for `n` ranks (nccl-tests `PERFORMANCE.md`).
    pub fn bus_factor(self, n: u32) -> f64 {
        let n = n.max(1) as f64;
        match self {
            Collective::AllReduce => 2.0 * (n - 1.0) / n,
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => {
                (n - 1.0) / n
            }
            _ => 1.0,
        }
    }
}

/// Algorithm bandwidth (bytes / time) and bus bandwidth in GB/s.
pub fn bandwidth_gb_per_s(collective: Collective, bytes: i64, ns: i64, ranks: u32) -> (f64, f64) {
    if ns <= 0 {
        return (0.0, 0.0);
    }
    let alg = bytes as f64 / ns as f64;
    let bus = alg * collective.bus_factor(ranks);
    (
        stats::round1(alg * 10.0) / 10.0,
        stats::round1(bus * 10.0) / 10.0,
    )
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CollectiveRow {
    pub device: i64,
    pub stream: i64,
    pub collective: Collective,
    pub count: u64,
    pub total_ns: i64,
    pub avg_ns: f64,
    pub min_ns: i64,
    pub max_ns: i64,
    /// Share of the device's NCCL time.
    pub share_pct: f64,
    /// Σ message bytes, when the export records sizes.
    pub bytes: Option<i64>,
    pub algbw_gb_per_s: Option<f64>,
    pub busbw_gb_per_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceNccl {
    pub device: i64,
    pub kernels: u64,
    pub total_ns: i64,
    /// Streams that carry NCCL kernels.
    pub streams: Vec<i64>,
    /// Share of the device's kernel time.
    pub share_of_kernel_time_pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Imbalance {
    pub collective: Collective,
    pub min_device: i64,
    pub min_ns: i64,
    pub max_device: i64,
    pub max_ns: i64,
    /// max / min.
    pub ratio: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Nccl {
    pub devices: Vec<DeviceNccl>,
    pub collectives: Vec<CollectiveRow>,
    /// Per collective, the device with the most and the least time (ranks wait for the slowest).
    pub imbalance: Vec<Imbalance>,
    /// Ranks seen (devices with NCCL kernels): the `n` of the bus-bandwidth factors.
    pub ranks: u32,
    pub message_sizes_recorded: bool,
    /// NCCL's API calls with their recorded message sizes (NVTX payloads), per API name.
    #[serde(default)]
    pub api_calls: Vec<ApiCallSizes>,
    /// Communicators as their init calls record them (ranks, this process's rank, CUDA device).
    #[serde(default)]
    pub communicators: Vec<super::nccl_payloads::NcclComm>,
    pub notes: Vec<String>,
}

/// NCCL API calls of one name with the sizes NCCL recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApiCallSizes {
    /// `ncclAllReduce`, `ncclAllGather`, `ncclSend`, ...
    pub api: String,
    pub collective: Collective,
    pub calls: u64,
    /// Σ `Message size [bytes]` as NCCL records it (per rank for all-gather and reduce-scatter).
    pub message_bytes: i64,
    pub min_message_bytes: i64,
    pub max_message_bytes: i64,
    /// Σ nccl-tests size S (× the communicator's ranks for all-gather, reduce-scatter, all-to-all), when the ranks are known.
    pub size_s_bytes: Option<i64>,
    /// Calls matched to the NCCL kernel that carried them.
    pub matched_to_kernels: u64,
}

pub fn nccl(p: &Profile, scope: &ResolvedScope) -> Result<Nccl> {
    let payloads = super::nccl_payloads::read(p)?;
    let messages = super::nccl_payloads::kernel_messages(p)?;
    let mut sized: BTreeMap<(i64, i64, Collective), (i64, i64)> = BTreeMap::new();
    let mut per: BTreeMap<(i64, i64, Collective), Vec<i64>> = BTreeMap::new();
    let mut dev_kernel_time: BTreeMap<i64, i64> = BTreeMap::new();
    for (ki, k) in p.kernels()?.iter().enumerate() {
        if !scope.admits(k.device, k.global_pid, k.start, k.end) {
            continue;
        }
        *dev_kernel_time.entry(k.device).or_default() += k.dur();
        let name = p.string(k.short_name);
        if is_nccl(name) {
            let key = (k.device, k.stream, Collective::of(name));
            per.entry(key).or_default().push(k.dur());
            if let Some(b) = messages.get(&(ki as u32)).and_then(|m| m.bytes) {
                let e = sized.entry(key).or_default();
                e.0 += b;
                e.1 += k.dur();
            }
        }
    }
    let mut devices: BTreeMap<i64, DeviceNccl> = BTreeMap::new();
    for ((d, s, _), v) in &per {
        let e = devices.entry(*d).or_insert_with(|| DeviceNccl {
            device: *d,
            kernels: 0,
            total_ns: 0,
            streams: Vec::new(),
            share_of_kernel_time_pct: 0.0,
        });
        e.kernels += v.len() as u64;
        e.total_ns += v.iter().sum::<i64>();
        if !e.streams.contains(s) {
            e.streams.push(*s);
        }
    }
    for d in devices.values_mut() {
        d.share_of_kernel_time_pct = pct1(
            d.total_ns,
            dev_kernel_time.get(&d.device).copied().unwrap_or(0),
        );
    }
    let ranks = devices.len() as u32;
    // The bus factor's n: the communicator's ranks when NCCL recorded them, else the devices seen here.
    let ranks_for_bw = payloads
        .comms
        .iter()
        .filter_map(|c| c.ranks)
        .max()
        .and_then(|r| u32::try_from(r).ok())
        .unwrap_or(ranks);
    let mut collectives: Vec<CollectiveRow> = per
        .iter()
        .map(|((d, s, c), v)| {
            let mut v = v.clone();
            let st = stats::stats(&mut v);
            let bw = sized
                .get(&(*d, *s, *c))
                .map(|&(b, t)| (b, bandwidth_gb_per_s(*c, b, t, ranks_for_bw)));
            CollectiveRow {
                device: *d,
                stream: *s,
                collective: *c,
                count: st.count,
                total_ns: st.total,
                avg_ns: st.avg,
                min_ns: st.min,
                max_ns: st.max,
                share_pct: pct1(st.total, devices.get(d).map_or(0, |x| x.total_ns)),
                bytes: bw.map(|b| b.0),
                algbw_gb_per_s: bw.map(|b| b.1.0),
                busbw_gb_per_s: bw.map(|b| b.1.1),
            }
        })
        .collect();
    collectives.sort_by(|a, b| {
        (a.device, a.stream, std::cmp::Reverse(a.total_ns)).cmp(&(
            b.device,
            b.stream,
            std::cmp::Reverse(b.total_ns),
        ))
    });
    let mut by_coll: BTreeMap<Collective, BTreeMap<i64, i64>> = BTreeMap::new();
    for r in &collectives {
        *by_coll
            .entry(r.collective)
            .or_default()
            .entry(r.device)
            .or_default() += r.total_ns;
    }
    let imbalance = by_coll
        .into_iter()
        .filter(|(_, m)| m.len() > 1)
        .filter_map(|(c, m)| {
            let (min_d, min_t) = m.iter().min_by_key(|(_, t)| **t)?;
            let (max_d, max_t) = m.iter().max_by_key(|(_, t)| **t)?;
            Some(Imbalance {
                collective: c,
                min_device: *min_d,
                min_ns: *min_t,
                max_device: *max_d,
                max_ns: *max_t,
                ratio: if *min_t > 0 {
                    stats::round_ratio(*max_t as i128, *min_t as i128, 100)
                } else {
                    0.0
                },
            })
        })
        .collect();
    let mut notes = Vec::new();
    let mut api: BTreeMap<String, ApiCallSizes> = BTreeMap::new();
    let matched = messages_calls(p, &payloads)?;
    for (i, c) in payloads.calls.iter().enumerate() {
        // Calls are CPU-side: scoped by process and trim window (a device scope does not apply to them).
        let pid = model::pid_of(c.global_tid);
        if scope.process.is_some_and(|want| want != pid)
            || scope
                .trim
                .is_some_and(|(s, e)| c.start_ns >= e || c.end_ns < s)
        {
            continue;
        }
        let Some(b) = c.message_bytes else { continue };
        let e = api.entry(c.api.clone()).or_insert_with(|| ApiCallSizes {
            api: c.api.clone(),
            collective: c.collective(),
            calls: 0,
            message_bytes: 0,
            min_message_bytes: i64::MAX,
            max_message_bytes: 0,
            size_s_bytes: Some(0),
            matched_to_kernels: 0,
        });
        e.calls += 1;
        e.message_bytes += b;
        e.min_message_bytes = e.min_message_bytes.min(b);
        e.max_message_bytes = e.max_message_bytes.max(b);
        e.size_s_bytes = e
            .size_s_bytes
            .zip(c.size_s(payloads.ranks_of(c.comm)))
            .map(|(a, b)| a + b);
        e.matched_to_kernels += matched.contains(&i) as u64;
    }
    let api_calls: Vec<ApiCallSizes> = api.into_values().collect();
    let message_sizes_recorded = !api_calls.is_empty();
    if !collectives.is_empty() && !message_sizes_recorded {
        notes.push(if payloads.nccl_ranges > 0 && !payloads.blobs_exported {
            "NCCL's NVTX ranges are here but not their payloads: export again with `nsys export --include-blobs=true` \
             to get message sizes; without them algorithm and bus bandwidth cannot be computed, and kernel time \
             includes waiting for the slowest rank"
                .to_string()
        } else {
            "message sizes are not recorded in this export (NCCL's NVTX payloads need NCCL 2.19 or later, `-t nvtx` \
             and `nsys export --include-blobs=true`), so algorithm and bus bandwidth cannot be computed; kernel time \
             includes waiting for the slowest rank"
                .to_string()
        });
    }
    if message_sizes_recorded {
        notes.push(
            "message sizes from NCCL's NVTX payloads; bandwidth per row is over kernel time, which includes waiting \
             for the slowest rank (the cross-rank analysis, aisp_profile_ranks, separates the two)"
                .to_string(),
        );
        if api_calls.iter().any(|a| a.matched_to_kernels < a.calls) {
            notes.push(
                "some NCCL calls launched no kernel of their own (one-rank communicators copy with memcpy; \
                 PyTorch skips some calls on one rank): their sizes are in api_calls only"
                    .to_string(),
            );
        }
    }
    Ok(Nccl {
        devices: devices.into_values().collect(),
        collectives,
        imbalance,
        ranks,
        message_sizes_recorded,
        api_calls,
        communicators: payloads.comms,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collectives_and_bus_factors_follow_nccl_tests() {
        assert_eq!(
            Collective::of("ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
            Collective::AllReduce
        );
        assert_eq!(
            Collective::of("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL"),
            Collective::ReduceScatter
        );
        assert_eq!(
            Collective::of("ncclDevKernel_Reduce_Sum_f32_RING_LL"),
            Collective::Reduce
        );
        assert_eq!(
            Collective::of("ncclDevKernel_SendRecv"),
            Collective::SendRecv
        );
        assert_eq!(Collective::of("ncclDevKernel_Generic"), Collective::Other);
        assert!(is_nccl("ncclDevKernel_Broadcast_RING_LL") && !is_nccl("gemm"));
        // 1 GB all-reduce over 8 ranks in 10 ms: algbw 100 GB/s, busbw 175 GB/s.
        let (alg, bus) = bandwidth_gb_per_s(Collective::AllReduce, 1_000_000_000, 10_000_000, 8);
        assert_eq!((alg, bus), (100.0, 175.0));
        assert_eq!(Collective::AllGather.bus_factor(4), 0.75);
    }
}
