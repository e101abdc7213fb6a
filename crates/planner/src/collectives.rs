//! Collective-communication cost: the nccl-tests bus-bandwidth factors and
//! ring-collective times over a link of known bandwidth.
//!
//! nccl-tests reports `algbw = S / t` and `busbw = algbw × factor`, where the
//! factor makes busbw comparable to the link's peak whatever the rank count
//! (github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md). Inverting it,
//! a ring collective of `S` bytes over `n` ranks whose slowest link moves `B`
//! bytes/s in one direction takes `t = S × factor / B`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const NCCL_TESTS_PERFORMANCE_URL: &str =
    "https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    Reduce,
    AllToAll,
    SendRecv,
}

impl Collective {
    /// busbw / algbw for `n` ranks (nccl-tests PERFORMANCE.md).
    pub fn bus_factor(self, n: u32) -> f64 {
        if n <= 1 {
            return 0.0;
        }
        let n = n as f64;
        match self {
            Collective::AllReduce => 2.0 * (n - 1.0) / n,
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => {
                (n - 1.0) / n
            }
            Collective::Broadcast | Collective::Reduce | Collective::SendRecv => 1.0,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::AllGather => "all_gather",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::AllToAll => "all_to_all",
            Collective::SendRecv => "send_recv",
        }
    }
}

/// Seconds for a collective of `bytes` (the nccl-tests size: the full buffer)
/// over `n` ranks on links of `link_bytes_per_s` per direction. Zero for one
/// rank; bandwidth term only (small-message latency is not modeled).
pub fn time_s(op: Collective, bytes: f64, n: u32, link_bytes_per_s: f64) -> f64 {
    if n <= 1 || bytes <= 0.0 || link_bytes_per_s <= 0.0 {
        return 0.0;
    }
    bytes * op.bus_factor(n) / link_bytes_per_s
}

/// Bus bandwidth from a measured time (what nccl-tests prints), bytes/s.
pub fn bus_bandwidth(op: Collective, bytes: f64, n: u32, seconds: f64) -> f64 {
    if seconds <= 0.0 {
        return 0.0;
    }
    bytes / seconds * op.bus_factor(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_tests_bus_factors() {
        assert_eq!(Collective::AllReduce.bus_factor(8), 1.75); // 2·7/8
        assert_eq!(Collective::AllReduce.bus_factor(2), 1.0);
        assert_eq!(Collective::AllGather.bus_factor(8), 0.875); // 7/8
        assert_eq!(Collective::ReduceScatter.bus_factor(4), 0.75);
        assert_eq!(Collective::AllToAll.bus_factor(8), 0.875);
        assert_eq!(Collective::Broadcast.bus_factor(8), 1.0);
        assert_eq!(Collective::Reduce.bus_factor(16), 1.0);
        assert_eq!(Collective::AllReduce.bus_factor(1), 0.0);
    }

    #[test]
    fn ring_all_reduce_time_over_nvlink() {
        // 1 GB all-reduce over 8 H100s at 450 GB/s per direction:
        // 1e9 · 1.75 / 450e9 = 3.888… ms.
        let t = time_s(Collective::AllReduce, 1e9, 8, 450e9);
        assert!((t - 1.75 / 450.0).abs() < 1e-12);
        // Inverse: busbw of that time is the link bandwidth again.
        assert!((bus_bandwidth(Collective::AllReduce, 1e9, 8, t) - 450e9).abs() < 1.0);
        assert_eq!(time_s(Collective::AllGather, 1e9, 1, 450e9), 0.0);
    }
}
