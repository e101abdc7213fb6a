//! Operations of the `hw` domain that measure the host rather than the GPU:
//! storage throughput (`aisp_hw_disk`) and network throughput and latency
//! (`aisp_hw_network`, with `aisp_hw_network_listen` as the peer). The work
//! lives in `aisp_hw::system::disk` and `aisp_hw::system::netbench`.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::OpContext;
use crate::error::OpError;
use crate::registry::{Hints, OpSpec, Operation};
use aisp_hw::host::HostRoot;
use aisp_hw::system::disk::{self, DiskError, DiskOptions, DiskReport};
use aisp_hw::system::netbench::{self, Latency, ListenReport, NetError, PerftestRow, Throughput};

// ---------------------------------------------------------------- disk

pub struct Disk;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiskInput {
    /// Directory to measure (default: the system temp dir). A temporary file is created there and always removed.
    #[serde(default)]
    pub path: Option<String>,
    /// Test file size in MiB (default 256, at most 16384).
    #[serde(default)]
    #[schemars(range(min = 1, max = 16384))]
    pub file_mib: Option<u64>,
    /// Sequential block size in KiB, a multiple of 4 (default 1024).
    #[serde(default)]
    #[schemars(range(min = 4, max = 65536))]
    pub block_kib: Option<u64>,
    /// Random block size in KiB, a multiple of 4 (default 4).
    #[serde(default)]
    #[schemars(range(min = 4, max = 65536))]
    pub random_block_kib: Option<u64>,
    /// Requests in flight (threads doing pread/pwrite; default 1, at most 64).
    #[serde(default)]
    #[schemars(range(min = 1, max = 64))]
    pub queue_depth: Option<u32>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct DiskOutput {
    #[serde(flatten)]
    pub report: DiskReport,
}

fn disk_error(e: DiskError) -> OpError {
    match e {
        DiskError::BadOption(m) => OpError::invalid_input(
            m,
            "Use block sizes that are multiples of 4 KiB and a file of at least one block.",
        ),
        DiskError::NotFound(_) | DiskError::NotADirectory(_) => OpError::not_found(
            e.to_string(),
            "Pass `path` as an existing directory on the disk to measure.",
        ),
        DiskError::NoSpace { .. } => OpError::invalid_input(
            e.to_string(),
            "Pass a smaller file_mib, or a directory on a filesystem with more free space.",
        ),
        DiskError::Io { .. } => OpError::unsupported(
            e.to_string(),
            "Check that the directory is writable by this user (the test needs to create a file there).",
        ),
        DiskError::Cancelled => OpError::cancelled(),
    }
}

impl Operation for Disk {
    type Input = DiskInput;
    type Output = DiskOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Disk throughput",
        summary: "Sequential and random read/write MB/s, IOPS and latency of a directory's filesystem (page cache excluded), and whether GPUDirect Storage is usable there.",
        description: "Measures a directory's storage: sequential and random read and write MB/s, IOPS and p50/p99 latency through a temporary file (always removed), with block size and queue depth you choose. Page cache excluded: O_DIRECT, or fdatasync plus posix_fadvise(DONTNEED) where O_DIRECT is unsupported (tmpfs); the answer says which. Also says whether GPUDirect Storage (cuFile, nvidia_fs, cufile.json) is usable. Use when data loading or checkpointing looks slow. No GPU needed; seconds.",
        hints: Hints::MEASURES,
        long_running: true,
        positional: &["path"],
        intents: &[
            "disk speed",
            "disk throughput",
            "storage bandwidth",
            "nvme read speed",
            "is my disk slow",
            "checkpoint write speed",
            "gpudirect storage",
            "iops",
        ],
        example: r#"{"path": "/data", "file_mib": 256, "queue_depth": 4}"#,
        ..OpSpec::new("hw", "disk")
    };

    fn run(&self, ctx: &OpContext, i: DiskInput) -> Result<DiskOutput, OpError> {
        let kib = |v: Option<u64>, d: u64| v.unwrap_or(d) as usize * 1024;
        let dir = i.path.map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
        let file_mib = i.file_mib.unwrap_or(256);
        if !(1..=16384).contains(&file_mib) {
            return Err(OpError::invalid_input(
                format!("file_mib must be 1..=16384, got {file_mib}"),
                "Pass e.g. \"file_mib\": 256.",
            ));
        }
        // The four phases share the call's time limit, leaving a margin to answer.
        let time_limit = ctx
            .remaining()
            .map(|r| r.saturating_sub(Duration::from_secs(2)))
            .unwrap_or(Duration::from_secs(60))
            // A minute at most: random 4 KiB phases on a slow disk would otherwise run for minutes.
            .clamp(Duration::from_secs(1), Duration::from_secs(60));
        let opts = DiskOptions {
            dir,
            file_bytes: file_mib << 20,
            block_bytes: kib(i.block_kib, 1024),
            random_block_bytes: kib(i.random_block_kib, 4),
            queue_depth: i.queue_depth.unwrap_or(1),
            time_limit,
            allow_direct: true,
        };
        let cancelled = || ctx.is_cancelled();
        let report = disk::measure(&opts, &HostRoot::live(), &cancelled, &|m| {
            ctx.progress(0.0, None, m)
        })
        .map_err(|e| match e {
            DiskError::Cancelled => ctx.stop_error(),
            e => disk_error(e),
        })?;
        Ok(DiskOutput { report })
    }
}

// ---------------------------------------------------------------- network

pub struct Network;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkInput {
    /// `host:port` of a peer running `aisp hw network-listen`; default: this host's loopback.
    #[serde(default)]
    #[schemars(length(max = 256))]
    pub peer: Option<String>,
    /// Seconds of streaming for throughput (default 3, at most 60).
    #[serde(default)]
    #[schemars(range(min = 1, max = 60))]
    pub seconds: Option<u32>,
    /// Parallel TCP streams (default 1, at most 16).
    #[serde(default)]
    #[schemars(range(min = 1, max = 16))]
    pub streams: Option<u32>,
    /// Run perftest's ib_write_bw on each active RDMA port when installed (needs execution allowed; default true).
    #[serde(default)]
    pub ib: Option<bool>,
    /// Host running `ib_write_bw -d <dev> --report_gbits` as server; default: a loopback server on this host.
    #[serde(default)]
    #[schemars(length(max = 256))]
    pub ib_peer: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TcpResult {
    /// `loopback` or the peer address.
    pub target: String,
    /// Local interface the traffic left through.
    pub interface: Option<String>,
    /// Its rated speed from sysfs, Gbit/s (null: loopback, virtual or unreported).
    pub link_gbit_per_s: Option<f64>,
    pub throughput: Throughput,
    /// Throughput as a share of the link's rate.
    pub pct_of_link: Option<f64>,
    pub latency: Latency,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct IbResult {
    pub device: String,
    pub port: u32,
    pub link_gbit_per_s: Option<f64>,
    /// `loopback` or the ib_peer host.
    pub target: String,
    pub rows: Vec<PerftestRow>,
    pub pct_of_link: Option<f64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct NetworkOutput {
    pub tcp: TcpResult,
    pub ib: Vec<IbResult>,
    /// What each figure means, and what was not measured and why.
    pub notes: Vec<String>,
}

fn net_error(e: NetError) -> OpError {
    match e {
        NetError::Cancelled => OpError::cancelled(),
        NetError::Resolve(_) => OpError::invalid_input(
            e.to_string(),
            "Pass `peer` as host:port, e.g. 10.0.0.2:5201.",
        ),
        NetError::Connect { .. } | NetError::NotAPeer(_) => OpError::not_found(
            e.to_string(),
            "Start the peer first: `aisp --allow-exec hw network-listen --bind 0.0.0.0:5201 --duration-s 120` on the other host, and check firewalls.",
        ),
        NetError::Bind { .. } | NetError::Io { .. } => OpError::unsupported(
            e.to_string(),
            "Check the network configuration of this host.",
        ),
    }
}

fn pct(measured: f64, link: Option<f64>) -> Option<f64> {
    link.filter(|l| *l > 0.0)
        .map(|l| (measured / l * 1000.0).round() / 10.0)
}

impl Operation for Network {
    type Input = NetworkInput;
    type Output = NetworkOutput;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Network throughput and latency",
        summary: "Measured TCP throughput and round-trip latency (loopback or to an aisp peer) and ib_write_bw RDMA bandwidth, each against the link's rated speed.",
        description: "Measures the network (the inventory is aisp_system_network): TCP throughput and small-message round-trip latency over loopback, or host-to-host against a peer running `aisp hw network-listen`, and InfiniBand/RoCE bandwidth with perftest's ib_write_bw when installed; each beside the link's rated speed. Use when multi-node training or data transfer is slower than the NICs promise. Seconds.",
        hints: Hints {
            read_only: false,
            destructive: false,
            idempotent: false,
            open_world: true,
        },
        long_running: true,
        positional: &["peer"],
        intents: &[
            "network bandwidth test",
            "measure network throughput",
            "tcp latency",
            "iperf",
            "ib_write_bw",
            "infiniband bandwidth test",
            "host to host bandwidth",
        ],
        example: r#"{"peer": "10.0.0.2:5201", "seconds": 5, "streams": 4}"#,
        ..OpSpec::new("hw", "network")
    };

    fn run(&self, ctx: &OpContext, i: NetworkInput) -> Result<NetworkOutput, OpError> {
        let seconds = i.seconds.unwrap_or(3).clamp(1, 60);
        let streams = i.streams.unwrap_or(1).clamp(1, 16);
        let stop = || ctx.is_cancelled();
        let host = HostRoot::live();
        let mut notes = Vec::new();
        let duration = Duration::from_secs(seconds as u64);
        let tcp = match i.peer.as_deref() {
            None => {
                let l = netbench::Listener::bind("127.0.0.1:0").map_err(net_error)?;
                let addr = l.address.to_string();
                // The local peer stops when the client is done, even after a failure.
                let finished = std::sync::atomic::AtomicBool::new(false);
                let server_stop = || stop() || finished.load(std::sync::atomic::Ordering::SeqCst);
                std::thread::scope(|s| -> Result<TcpResult, OpError> {
                    let server = s.spawn(|| {
                        l.serve(
                            duration + Duration::from_secs(30),
                            streams + 1,
                            &server_stop,
                            &|_| {},
                        )
                    });
                    let measured = (|| {
                        ctx.progress(0.0, None, "TCP loopback throughput");
                        let (t, _) = netbench::throughput(&addr, streams, duration, &stop)?;
                        ctx.progress(0.5, Some(1.0), "TCP loopback latency");
                        let lat = netbench::latency(&addr, 2000, Duration::from_secs(5), &stop)?;
                        Ok((t, lat))
                    })();
                    finished.store(true, std::sync::atomic::Ordering::SeqCst);
                    let _ = server.join();
                    let (throughput, latency) = measured.map_err(net_error)?;
                    Ok(TcpResult {
                        target: "loopback".into(),
                        interface: Some("lo".into()),
                        link_gbit_per_s: None,
                        throughput,
                        pct_of_link: None,
                        latency,
                    })
                })?
            }
            Some(peer) => {
                ctx.progress(0.0, None, format!("TCP throughput to {peer}"));
                let (throughput, local) =
                    netbench::throughput(peer, streams, duration, &stop).map_err(net_error)?;
                ctx.progress(0.5, Some(1.0), format!("TCP latency to {peer}"));
                let latency = netbench::latency(peer, 2000, Duration::from_secs(5), &stop)
                    .map_err(net_error)?;
                let interface = netbench::interface_of(local.ip());
                let link = interface
                    .as_deref()
                    .and_then(|n| netbench::link_speed_gbps(&host, n));
                if link.is_none() {
                    notes.push(format!(
                        "no rated speed for {} in /sys/class/net (virtual NIC, bond or down): throughput is not compared with a link rate",
                        interface.as_deref().unwrap_or("the outgoing interface")
                    ));
                }
                TcpResult {
                    target: peer.to_string(),
                    pct_of_link: pct(throughput.gbit_per_s, link),
                    interface,
                    link_gbit_per_s: link,
                    throughput,
                    latency,
                }
            }
        };
        if tcp.target == "loopback" {
            notes.push("loopback has no link rate: its throughput is the host's TCP stack and memory copies, an upper bound for one host's sockets, not a NIC's".into());
        }
        if let (Some(p), Some(l)) = (tcp.pct_of_link, tcp.link_gbit_per_s)
            && p < 70.0
        {
            notes.push(format!(
                "TCP reached {p}% of the {l} Gbit/s link: try more streams, check MTU, IRQ/NUMA placement and the peer's CPU"
            ));
        }
        let ib = self.ib(ctx, &i, &host, &mut notes);
        Ok(NetworkOutput { tcp, ib, notes })
    }
}

impl Network {
    fn ib(
        &self,
        ctx: &OpContext,
        i: &NetworkInput,
        host: &HostRoot,
        notes: &mut Vec<String>,
    ) -> Vec<IbResult> {
        let report = aisp_hw::system::network::inspect(host, &[]);
        let ports: Vec<(String, u32, Option<f64>)> = report
            .rdma_devices
            .iter()
            .flat_map(|d| {
                d.ports
                    .iter()
                    .filter(|p| p.state.as_deref() == Some("ACTIVE"))
                    .map(move |p| (d.name.clone(), p.port, p.rate_gbps))
            })
            .collect();
        if ports.is_empty() {
            notes.push(
                "no active InfiniBand/RoCE port under /sys/class/infiniband: RDMA not measured"
                    .into(),
            );
            return Vec::new();
        }
        if i.ib == Some(false) {
            notes.push("RDMA not measured (ib: false)".into());
            return Vec::new();
        }
        let path = std::env::var("PATH").unwrap_or_default();
        let Some(prog) = aisp_hw::system::which("ib_write_bw", &path) else {
            notes.push(format!(
                "{} active RDMA port(s) but ib_write_bw is not on PATH: install perftest (apt install perftest) to measure them",
                ports.len()
            ));
            return Vec::new();
        };
        if !ctx.app().config.allow_exec {
            notes.push(format!(
                "ib_write_bw found at {} but not run: it starts programs and opens ports, which needs execution allowed (--allow-exec)",
                prog.display()
            ));
            return Vec::new();
        }
        let secs = i.seconds.unwrap_or(3).clamp(1, 30);
        let mut out = Vec::new();
        for (dev, port, rate) in ports {
            if ctx.is_cancelled() {
                break;
            }
            ctx.progress(0.8, Some(1.0), format!("ib_write_bw on {dev}"));
            match netbench::run_ib_write_bw(&prog, &dev, i.ib_peer.as_deref(), secs) {
                Ok((rows, _)) => {
                    let best = rows
                        .iter()
                        .map(|r| r.bw_average_gbit_per_s)
                        .fold(0.0, f64::max);
                    out.push(IbResult {
                        pct_of_link: pct(best, rate),
                        device: dev,
                        port,
                        link_gbit_per_s: rate,
                        target: i.ib_peer.clone().unwrap_or_else(|| "loopback".into()),
                        rows,
                    });
                }
                Err(e) => notes.push(format!("{dev} port {port}: {e}")),
            }
        }
        out
    }
}

// ---------------------------------------------------------------- listen

pub struct NetworkListen;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListenInput {
    /// Address to listen on (default 127.0.0.1:5201; 0.0.0.0:5201 for other hosts, which needs execution allowed).
    #[serde(default)]
    #[schemars(length(max = 256))]
    pub bind: Option<String>,
    /// Stop after this many seconds (required: a listener always has a time limit; at most 3600).
    #[schemars(range(min = 1, max = 3600))]
    pub duration_s: u32,
    /// Stop after this many finished sessions (default 64).
    #[serde(default)]
    #[schemars(range(min = 1, max = 10000))]
    pub max_sessions: Option<u32>,
}

impl Operation for NetworkListen {
    type Input = ListenInput;
    type Output = ListenReport;
    const SPEC: &'static OpSpec = &OpSpec {
        title: "Network test peer",
        summary: "Listens for aisp_hw_network from another host for a limited time: sinks its throughput streams and echoes its latency pings.",
        description: "Runs the peer side of aisp_hw_network on this host for a limited time: accepts its TCP throughput streams and latency pings, stores and runs nothing. Listening beyond loopback needs execution allowed. Start it on host B, then call aisp_hw_network with peer B:port on host A.",
        hints: Hints {
            read_only: true,
            destructive: false,
            idempotent: false,
            open_world: true,
        },
        long_running: true,
        intents: &[
            "network test server",
            "listen for network test",
            "iperf server",
        ],
        example: r#"{"bind": "0.0.0.0:5201", "duration_s": 120}"#,
        ..OpSpec::new("hw", "network_listen")
    };

    fn run(&self, ctx: &OpContext, i: ListenInput) -> Result<ListenReport, OpError> {
        let bind = i.bind.unwrap_or_else(|| "127.0.0.1:5201".into());
        if !is_loopback_bind(&bind) && !ctx.app().config.allow_exec {
            return Err(OpError::exec_not_allowed(format!(
                "listening on {bind} opens a port to other hosts, which this aisp does not allow"
            )));
        }
        let mut limit = Duration::from_secs(i.duration_s.clamp(1, 3600) as u64);
        if let Some(r) = ctx.remaining() {
            limit = limit.min(r.saturating_sub(Duration::from_secs(1)));
        }
        let l = netbench::Listener::bind(&bind).map_err(net_error)?;
        // Say where to connect before blocking (the CLI prints progress on stderr).
        ctx.progress(
            0.0,
            None,
            format!("listening on {} for {} s", l.address, limit.as_secs()),
        );
        tracing::info!("aisp network peer listening on {}", l.address);
        let stop = || ctx.is_cancelled();
        let report = l.serve(limit, i.max_sessions.unwrap_or(64).max(1), &stop, &|s| {
            ctx.progress(
                0.0,
                None,
                format!("{} session from {}: {} bytes", s.mode, s.peer, s.bytes),
            )
        });
        Ok(report)
    }
}

/// Whether `host:port` binds to loopback only (`localhost`, 127.0.0.0/8, `[::1]`).
pub fn is_loopback_bind(bind: &str) -> bool {
    bind.rsplit_once(':')
        .map(|(h, _)| h.trim_matches(['[', ']']))
        .is_some_and(|h| h == "localhost" || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()))
}
