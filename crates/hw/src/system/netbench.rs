//! Network measurements: TCP throughput and round-trip latency against an
//! aisp peer (or this host's own loopback), and InfiniBand/RoCE bandwidth
//! through perftest's `ib_write_bw`, each beside the link's rated speed.
//!
//! The peer protocol is aisp's own and tiny: the client sends one line
//! `AISPNET1 sink` or `AISPNET1 echo`, then either streams bytes until it
//! shuts its write half (the peer answers `OK <bytes> <nanoseconds>` with what
//! it received) or sends small messages the peer echoes back. A listener
//! ([`listen`]) runs until its time limit or session limit, never stores what
//! it receives and never runs anything.

use aisp_base::Cancel;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;

use crate::host::HostRoot;

const MAGIC: &str = "AISPNET1";
/// Write size of the throughput streams.
const CHUNK: usize = 1 << 20;
/// Message size of the latency test.
pub const PING_BYTES: usize = 64;
/// Sessions a listener serves at once; more are turned away.
const MAX_CONCURRENT: u32 = 16;

#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("cannot resolve `{0}` to an address")]
    Resolve(String),
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error(
        "the peer at {0} did not answer as an aisp listener (run `aisp hw network-listen` there)"
    )]
    NotAPeer(String),
    #[error("cancelled")]
    Cancelled,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> NetError {
    let what = what.into();
    move |source| NetError::Io { what, source }
}

/// One session a listener served.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Session {
    pub peer: String,
    /// `sink` (throughput), `echo` (latency) or `refused`.
    pub mode: String,
    pub bytes: u64,
    pub seconds: f64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ListenReport {
    /// Address actually bound (with the port the system chose for port 0).
    pub address: String,
    pub sessions: Vec<Session>,
    /// `time_limit`, `session_limit` or `cancelled`.
    pub ended_by: String,
    pub seconds: f64,
}

/// A bound listener; [`Listener::serve`] runs it.
pub struct Listener {
    inner: TcpListener,
    pub address: SocketAddr,
}

impl Listener {
    pub fn bind(addr: &str) -> Result<Listener, NetError> {
        let inner = TcpListener::bind(addr).map_err(|source| NetError::Bind {
            addr: addr.to_string(),
            source,
        })?;
        let address = inner
            .local_addr()
            .map_err(io("reading the bound address"))?;
        inner
            .set_nonblocking(true)
            .map_err(io("making the listener non-blocking"))?;
        Ok(Listener { inner, address })
    }

    /// Serve until `time_limit`, `max_sessions` finished sessions, or `stop()`.
    pub fn serve(
        &self,
        time_limit: Duration,
        max_sessions: u32,
        stop: Cancel<'_>,
        on_session: &(dyn Fn(&Session) + Sync),
    ) -> ListenReport {
        let started = Instant::now();
        let deadline = started + time_limit;
        let sessions = Mutex::new(Vec::new());
        let done = AtomicU32::new(0);
        let active = AtomicU32::new(0);
        let quit = AtomicBool::new(false);
        let ended_by = std::thread::scope(|s| {
            let ended = loop {
                if stop() {
                    break "cancelled";
                }
                if Instant::now() >= deadline {
                    break "time_limit";
                }
                if done.load(Ordering::SeqCst) >= max_sessions {
                    break "session_limit";
                }
                match self.inner.accept() {
                    Ok((stream, peer)) => {
                        if active.load(Ordering::SeqCst) >= MAX_CONCURRENT {
                            let _ = stream.shutdown(Shutdown::Both);
                            continue;
                        }
                        active.fetch_add(1, Ordering::SeqCst);
                        let (sessions, done, active, quit) = (&sessions, &done, &active, &quit);
                        s.spawn(move || {
                            let rec = serve_one(stream, peer, deadline, quit);
                            on_session(&rec);
                            if let Ok(mut v) = sessions.lock() {
                                v.push(rec);
                            }
                            active.fetch_sub(1, Ordering::SeqCst);
                            done.fetch_add(1, Ordering::SeqCst);
                        });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            };
            quit.store(true, Ordering::SeqCst);
            ended
        });
        ListenReport {
            address: self.address.to_string(),
            sessions: sessions.into_inner().unwrap_or_default(),
            ended_by: ended_by.into(),
            seconds: started.elapsed().as_secs_f64(),
        }
    }
}

/// Serve one connection; never longer than the listener's deadline.
fn serve_one(stream: TcpStream, peer: SocketAddr, deadline: Instant, quit: &AtomicBool) -> Session {
    let mut rec = Session {
        peer: peer.to_string(),
        mode: "refused".into(),
        bytes: 0,
        seconds: 0.0,
    };
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let _ = stream.set_nodelay(true);
    let Ok(writer) = stream.try_clone() else {
        return rec;
    };
    let mut reader = BufReader::with_capacity(CHUNK, stream);
    let mut line = String::new();
    // The header arrives within a couple of seconds or the session is dropped.
    let header_deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match reader.by_ref().take(64).read_line(&mut line) {
            Ok(_) if line.ends_with('\n') => break,
            Ok(0) => return rec,
            Ok(_) => {}
            Err(e) if is_timeout(&e) => {}
            Err(_) => return rec,
        }
        if Instant::now() >= header_deadline.min(deadline) || line.len() >= 64 {
            return rec;
        }
    }
    let mode = match line.trim().strip_prefix(MAGIC).map(str::trim) {
        Some("sink") => "sink",
        Some("echo") => "echo",
        _ => return rec,
    };
    rec.mode = mode.into();
    let started = Instant::now();
    let mut writer = writer;
    let mut buf = vec![0u8; CHUNK];
    let mut first: Option<Instant> = None;
    loop {
        if quit.load(Ordering::Relaxed) || Instant::now() >= deadline {
            break;
        }
        match reader.read(&mut buf) {
            Ok(0) => {
                if mode == "sink" {
                    let ns = first.map(|f| f.elapsed().as_nanos()).unwrap_or(0);
                    let _ = writer.write_all(format!("OK {} {ns}\n", rec.bytes).as_bytes());
                }
                break;
            }
            Ok(n) => {
                first.get_or_insert_with(Instant::now);
                rec.bytes += n as u64;
                if mode == "echo" && writer.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if is_timeout(&e) => {}
            Err(_) => break,
        }
    }
    rec.seconds = started.elapsed().as_secs_f64();
    rec
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::Interrupted
    )
}

/// Throughput from this host to the peer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Throughput {
    pub streams: u32,
    /// Bytes the peer says it received.
    pub bytes: u64,
    pub seconds: f64,
    pub gbit_per_s: f64,
}

/// Round trips of small messages.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Latency {
    pub message_bytes: usize,
    pub round_trips: u32,
    pub min_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

fn connect(addr: &str, timeout: Duration) -> Result<TcpStream, NetError> {
    let targets: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|_| NetError::Resolve(addr.into()))?
        .collect();
    let mut last = None;
    for t in &targets {
        match TcpStream::connect_timeout(t, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(NetError::Connect {
        addr: addr.into(),
        source: last.unwrap_or_else(|| std::io::Error::other("no address")),
    })
}

/// Stream for `duration` over `streams` connections; the rate is the bytes the
/// peer counted over the time until its last answer.
pub fn throughput(
    addr: &str,
    streams: u32,
    duration: Duration,
    stop: Cancel<'_>,
) -> Result<(Throughput, SocketAddr), NetError> {
    let mut conns = Vec::new();
    for _ in 0..streams.max(1) {
        let mut s = connect(addr, Duration::from_secs(5))?;
        s.write_all(format!("{MAGIC} sink\n").as_bytes())
            .map_err(io("sending the header"))?;
        conns.push(s);
    }
    let local = conns[0]
        .local_addr()
        .map_err(io("reading the local address"))?;
    let started = Instant::now();
    let results: Vec<Result<u64, NetError>> = std::thread::scope(|sc| {
        let hs: Vec<_> = conns
            .into_iter()
            .map(|mut s| {
                sc.spawn(move || -> Result<u64, NetError> {
                    let buf = vec![0x5au8; CHUNK];
                    let until = Instant::now() + duration;
                    while Instant::now() < until && !stop() {
                        s.write_all(&buf).map_err(io("streaming to the peer"))?;
                    }
                    s.shutdown(Shutdown::Write)
                        .map_err(io("closing the stream"))?;
                    s.set_read_timeout(Some(Duration::from_secs(30)))
                        .map_err(io("setting a timeout"))?;
                    let mut line = String::new();
                    BufReader::new(s)
                        .take(128)
                        .read_line(&mut line)
                        .map_err(io("reading the peer's count"))?;
                    let mut f = line.split_whitespace();
                    match (f.next(), f.next().and_then(|b| b.parse::<u64>().ok())) {
                        (Some("OK"), Some(b)) => Ok(b),
                        _ => Err(NetError::NotAPeer(addr.into())),
                    }
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(NetError::Io {
                        what: "stream thread".into(),
                        source: std::io::Error::other("panicked"),
                    })
                })
            })
            .collect()
    });
    if stop() {
        return Err(NetError::Cancelled);
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut bytes = 0;
    for r in results {
        bytes += r?;
    }
    Ok((
        Throughput {
            streams: streams.max(1),
            bytes,
            seconds: round(seconds, 4),
            gbit_per_s: round(bytes as f64 * 8.0 / seconds / 1e9, 3),
        },
        local,
    ))
}

/// Up to `count` round trips of [`PING_BYTES`] within `budget`.
pub fn latency(
    addr: &str,
    count: u32,
    budget: Duration,
    stop: Cancel<'_>,
) -> Result<Latency, NetError> {
    let mut s = connect(addr, Duration::from_secs(5))?;
    s.set_nodelay(true).map_err(io("setting TCP_NODELAY"))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(io("setting a timeout"))?;
    s.write_all(format!("{MAGIC} echo\n").as_bytes())
        .map_err(io("sending the header"))?;
    let msg = [0xa5u8; PING_BYTES];
    let mut back = [0u8; PING_BYTES];
    let mut rtts = Vec::new();
    let until = Instant::now() + budget;
    for i in 0..count + 10 {
        if stop() {
            return Err(NetError::Cancelled);
        }
        if Instant::now() >= until {
            break;
        }
        let t = Instant::now();
        s.write_all(&msg).map_err(io("sending a ping"))?;
        s.read_exact(&mut back).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                NetError::NotAPeer(addr.into())
            } else {
                io("reading the echo")(e)
            }
        })?;
        // The first ten warm the connection up.
        if i >= 10 {
            rtts.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    let _ = s.shutdown(Shutdown::Both);
    rtts.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| {
        if rtts.is_empty() {
            0.0
        } else {
            round(rtts[((rtts.len() - 1) as f64 * p).round() as usize], 1)
        }
    };
    Ok(Latency {
        message_bytes: PING_BYTES,
        round_trips: rtts.len() as u32,
        min_us: pct(0.0),
        p50_us: pct(0.5),
        p99_us: pct(0.99),
    })
}

fn round(x: f64, d: i32) -> f64 {
    let f = 10f64.powi(d);
    (x * f).round() / f
}

/// The interface holding local address `ip`, through getifaddrs.
pub fn interface_of(ip: IpAddr) -> Option<String> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we free with freeifaddrs below; we
    // only read the entries while the list is alive.
    unsafe {
        if libc::getifaddrs(&mut head) != 0 {
            return None;
        }
        let mut cur = head;
        let mut found = None;
        while !cur.is_null() {
            let a = (*cur).ifa_addr;
            if !a.is_null() {
                let this = match (*a).sa_family as i32 {
                    libc::AF_INET => {
                        let sin = &*(a as *const libc::sockaddr_in);
                        Some(IpAddr::from(
                            u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                        ))
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(a as *const libc::sockaddr_in6);
                        Some(IpAddr::from(sin6.sin6_addr.s6_addr))
                    }
                    _ => None,
                };
                if this == Some(ip) {
                    found = Some(
                        std::ffi::CStr::from_ptr((*cur).ifa_name)
                            .to_string_lossy()
                            .into_owned(),
                    );
                    break;
                }
            }
            cur = (*cur).ifa_next;
        }
        libc::freeifaddrs(head);
        found
    }
}

/// The rated speed of an interface from sysfs, Gbit/s (None: down, virtual or loopback).
pub fn link_speed_gbps(host: &HostRoot, iface: &str) -> Option<f64> {
    host.read_num::<i64>(&format!("/sys/class/net/{iface}/speed"))
        .filter(|&s| s > 0)
        .map(|s| s as f64 / 1000.0)
}

/// One `ib_write_bw` result row.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct PerftestRow {
    pub bytes: u64,
    pub iterations: u64,
    pub bw_peak_gbit_per_s: f64,
    pub bw_average_gbit_per_s: f64,
    pub msg_rate_mpps: Option<f64>,
}

/// Parse perftest's result table (`--report_gbits` or the default MB/sec).
pub fn parse_perftest(text: &str) -> Vec<PerftestRow> {
    let mut rows = Vec::new();
    let mut cols: Option<(Vec<String>, f64)> = None;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("#bytes") {
            let names: Vec<String> = t
                .split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect();
            // MB/sec in perftest is 2^20 bytes per second.
            let scale = if t.contains("Gb/sec") {
                1.0
            } else if t.contains("MiB/sec") || t.contains("MB/sec") {
                8.0 * 1_048_576.0 / 1e9
            } else {
                continue;
            };
            cols = Some((names, scale));
            continue;
        }
        let Some((names, scale)) = &cols else {
            continue;
        };
        let vals: Vec<f64> = t
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        if vals.len() < names.len() || vals.is_empty() {
            continue;
        }
        let at = |prefix: &str| {
            names
                .iter()
                .position(|n| n.starts_with(prefix))
                .map(|i| vals[i])
        };
        if let (Some(b), Some(it), Some(pk), Some(avg)) = (
            at("#bytes"),
            at("#iterations"),
            at("BW peak"),
            at("BW average"),
        ) {
            rows.push(PerftestRow {
                bytes: b as u64,
                iterations: it as u64,
                bw_peak_gbit_per_s: round(pk * scale, 3),
                bw_average_gbit_per_s: round(avg * scale, 3),
                msg_rate_mpps: at("MsgRate"),
            });
        }
    }
    rows
}

/// Run `ib_write_bw` on `device` against `server` (a peer already running
/// `ib_write_bw -d <dev> --report_gbits`), or against a server this call
/// starts on the same host when `server` is None (loopback through the HCA).
pub fn run_ib_write_bw(
    program: &Path,
    device: &str,
    server: Option<&str>,
    seconds: u32,
) -> Result<(Vec<PerftestRow>, String), String> {
    let secs = seconds.clamp(1, 30).to_string();
    let base = ["-d", device, "-D", secs.as_str(), "--report_gbits", "-F"];
    let timeout = Duration::from_secs(seconds as u64 + 20);
    let mut local_server = None;
    let target = match server {
        Some(s) => s.to_string(),
        None => {
            let child = std::process::Command::new(program)
                .args(base)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .map_err(|e| format!("could not start {} as the server: {e}", program.display()))?;
            local_server = Some(child);
            std::thread::sleep(Duration::from_millis(700));
            "127.0.0.1".to_string()
        }
    };
    let mut args: Vec<&str> = base.to_vec();
    args.push(&target);
    let out = super::exec::run_with_timeout(program, &args, timeout);
    if let Some(mut c) = local_server {
        // The server ends with the client; make sure of it.
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline && matches!(c.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
    }
    let out = out.map_err(|e| e.to_string())?;
    let rows = parse_perftest(&out.stdout);
    if rows.is_empty() {
        let tail: String = format!("{}{}", out.stdout, out.stderr)
            .lines()
            .rev()
            .take(4)
            .collect::<Vec<_>>()
            .join(" | ");
        return Err(format!(
            "ib_write_bw exited with {:?} and printed no result table: {tail}",
            out.status
        ));
    }
    Ok((rows, out.stdout))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GBITS: &str = "\
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF\t\tDevice         : mlx5_0
 Number of qps   : 1\t\tTransport type : IB
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      2183700          0.00               381.54             0.727729
---------------------------------------------------------------------------------------
";

    const MBS: &str = "\
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      5000             11800.50            11790.25            0.188644
";

    #[test]
    fn perftest_tables_parse_in_both_units() {
        let r = parse_perftest(GBITS);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].bytes, 65536);
        assert_eq!(r[0].iterations, 2183700);
        assert_eq!(r[0].bw_average_gbit_per_s, 381.54);
        assert_eq!(r[0].msg_rate_mpps, Some(0.727729));
        let m = parse_perftest(MBS);
        // 11790.25 MiB/s = 11790.25 * 8 * 1048576 / 1e9 Gbit/s.
        assert_eq!(m[0].bw_average_gbit_per_s, 98.904);
        assert!(parse_perftest("no table here").is_empty());
    }

    #[test]
    fn loopback_peer_answers_sink_and_echo() {
        let l = Listener::bind("127.0.0.1:0").unwrap();
        let addr = l.address.to_string();
        let never = || false;
        std::thread::scope(|s| {
            let h = s.spawn(|| l.serve(Duration::from_secs(20), 3, &never, &|_| {}));
            let (t, local) = throughput(&addr, 2, Duration::from_millis(300), &never).unwrap();
            assert!(local.ip().is_loopback());
            assert_eq!(t.streams, 2);
            assert!(t.bytes >= 2 * CHUNK as u64, "{t:?}");
            assert!(t.gbit_per_s > 0.0);
            let lat = latency(&addr, 200, Duration::from_secs(5), &never).unwrap();
            assert_eq!(lat.round_trips, 200);
            assert!(lat.min_us > 0.0 && lat.min_us <= lat.p50_us && lat.p50_us <= lat.p99_us);
            let rep = h.join().unwrap();
            assert_eq!(rep.ended_by, "session_limit");
            let sunk: u64 = rep
                .sessions
                .iter()
                .filter(|x| x.mode == "sink")
                .map(|x| x.bytes)
                .sum();
            assert_eq!(sunk, t.bytes);
            let echoed: u64 = rep
                .sessions
                .iter()
                .filter(|x| x.mode == "echo")
                .map(|x| x.bytes)
                .sum();
            assert_eq!(echoed, 210 * PING_BYTES as u64);
        });
    }

    #[test]
    fn a_non_aisp_peer_is_named_as_such() {
        // A server that accepts and closes: not an aisp listener.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let h = std::thread::spawn(move || {
            for s in l.incoming().take(1) {
                drop(s);
            }
        });
        let e = latency(&addr, 5, Duration::from_secs(2), &|| false).unwrap_err();
        assert!(
            matches!(e, NetError::NotAPeer(_) | NetError::Io { .. }),
            "{e}"
        );
        h.join().unwrap();
        let lo = interface_of("127.0.0.1".parse().unwrap());
        assert_eq!(lo.as_deref(), Some("lo"));
    }
}
