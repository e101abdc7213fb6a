//! NCCL's own record of each call: the NVTX ranges NCCL (2.19 and later)
//! pushes around its API calls (`ncclAllReduce`, `ncclSend`, ...) carry a
//! binary payload with the communicator, the message size and, for
//! point-to-point calls, the peer. Nsight Systems keeps it in
//! `NVTX_EVENTS.binaryData` when the export is made with
//! `nsys export --include-blobs=true`, and describes its layout in
//! `NVTX_PAYLOAD_SCHEMAS` / `NVTX_PAYLOAD_SCHEMA_ENTRIES`.
//!
//! The blob, as nsys 2025.3 writes it for NCCL 2.28 (verified on the capture in
//! `tests/data/capture/nccl_sizes_1gpu.*`): a little-endian `u64` count of
//! payloads, then per payload `{u64 schemaId, u64 size, u64 offset}` (the
//! offset of its bytes from the start of the blob), then the payload bytes.
//! Fields are located by the schema entries' names and offsets, never by
//! position, so a later NCCL that adds fields still reads.
//!
//! NCCL's message size is per rank for all-gather and reduce-scatter
//! (`sendcount`/`recvcount` × type size): [`NcclCall::size_s`] scales it to the
//! nccl-tests size `S` with the communicator's rank count.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::nccl::Collective;
use super::{Profile, Result, model};

/// One NCCL API call with its payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NcclCall {
    /// The NVTX range name (`ncclAllReduce`, `ncclAllGather`, `ncclSend`, ...).
    pub api: String,
    pub start_ns: i64,
    pub end_ns: i64,
    pub global_tid: i64,
    /// `NCCL communicator ID`.
    pub comm: Option<u64>,
    /// `Message size [bytes]` as NCCL records it (per rank for all-gather / reduce-scatter).
    pub message_bytes: Option<i64>,
    /// The peer of a send or receive, in the communicator.
    pub peer: Option<i64>,
    /// `Root` of a broadcast or reduce.
    pub root: Option<i64>,
}

/// A communicator as `ncclCommInitRank*` records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NcclComm {
    pub comm: u64,
    pub ranks: Option<i64>,
    pub rank: Option<i64>,
    pub cuda_device: Option<i64>,
}

/// Every NCCL call with a payload in an export.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NcclPayloads {
    pub calls: Vec<NcclCall>,
    pub comms: Vec<NcclComm>,
    /// NVTX ranges of the NCCL domain (with or without payloads): 0 when NCCL's NVTX was off or not traced.
    pub nccl_ranges: u64,
    /// Whether the export holds payload blobs at all (`--include-blobs=true`).
    pub blobs_exported: bool,
}

impl NcclCall {
    /// The collective this API call is.
    pub fn collective(&self) -> Collective {
        let n = self.api.trim_start_matches("nccl");
        match n {
            "AlltoAll" | "AllToAll" | "AlltoAllv" => Collective::AllToAll,
            _ => Collective::of(n),
        }
    }

    /// The nccl-tests message size `S` given the communicator's rank count: NCCL records all-gather and
    /// reduce-scatter per rank and all-to-all per peer, so those are scaled by `ranks`.
    pub fn size_s(&self, ranks: Option<i64>) -> Option<i64> {
        let b = self.message_bytes?;
        match self.collective() {
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => {
                Some(b * ranks?.max(1))
            }
            _ => Some(b),
        }
    }
}

impl NcclPayloads {
    /// Ranks of a communicator, from its init call.
    pub fn ranks_of(&self, comm: Option<u64>) -> Option<i64> {
        let c = comm?;
        self.comms
            .iter()
            .find(|x| x.comm == c)
            .and_then(|x| x.ranks)
    }
}

/// One schema field: (offset, payload entry type).
type Field = (usize, i64);

/// Read a little-endian integer of an NVTX payload entry type at `off`.
fn read_field(bytes: &[u8], (off, ty): Field) -> Option<i64> {
    // nvToolsExtPayload.h entry types: 1..=4 char/short, 5/6 int/uint, 7..=10 long/longlong,
    // 11..=18 fixed-width int8..uint64, 22 size_t, 23 address.
    let width = match ty {
        1 | 2 | 11 | 12 => 1,
        3 | 4 | 13 | 14 => 2,
        5 | 6 | 15 | 16 => 4,
        7..=10 | 17 | 18 | 22 | 23 => 8,
        _ => return None,
    };
    let b = bytes.get(off..off + width)?;
    let signed = matches!(ty, 1 | 3 | 5 | 7 | 9 | 11 | 13 | 15 | 17);
    Some(match width {
        1 if signed => b[0] as i8 as i64,
        1 => b[0] as i64,
        2 if signed => i16::from_le_bytes([b[0], b[1]]) as i64,
        2 => u16::from_le_bytes([b[0], b[1]]) as i64,
        4 if signed => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
        4 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
        _ => i64::from_le_bytes(b.try_into().ok()?),
    })
}

/// The payloads in one blob: (schema id, bytes).
pub fn split_blob(blob: &[u8]) -> Vec<(i64, &[u8])> {
    let u64_at = |o: usize| {
        blob.get(o..o + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    };
    let Some(count) = u64_at(0) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    // A count beyond what the header could hold is not this layout.
    if count == 0 || count > 64 || 8 + 24 * count as usize > blob.len() {
        return out;
    }
    for i in 0..count as usize {
        let h = 8 + 24 * i;
        let (Some(schema), Some(size), Some(offset)) = (u64_at(h), u64_at(h + 8), u64_at(h + 16))
        else {
            break;
        };
        let (size, offset) = (size as usize, offset as usize);
        if let Some(b) = offset
            .checked_add(size)
            .and_then(|end| blob.get(offset..end))
        {
            out.push((schema as i64, b));
        }
    }
    out
}

/// Read NCCL's call payloads. An export without the payload tables or blobs gives an empty answer
/// (`blobs_exported` false), not an error.
pub fn read(p: &Profile) -> Result<NcclPayloads> {
    let mut out = NcclPayloads::default();
    let (Some(ev), Some(entries)) = (
        p.schema().exact("NVTX_EVENTS"),
        p.schema().exact("NVTX_PAYLOAD_SCHEMA_ENTRIES"),
    ) else {
        return Ok(out);
    };
    if !ev.has("binaryData") {
        return Ok(out);
    }
    let path = p.source().to_path_buf();
    // (domain, schema) → field name → (offset, type).
    let mut schemas: HashMap<(i64, i64), HashMap<String, Field>> = HashMap::new();
    let sql = format!(
        "SELECT domainId, schemaId, name, {}, {} FROM {}",
        entries.col_or("offset", "NULL"),
        entries.col_or("type", "NULL"),
        entries.quoted()
    );
    model::scan(p.conn(), &path, &sql, |r| {
        let key = (model::int(r, 0), model::int(r, 1));
        if let Some(name) = model::text(r, 2) {
            schemas.entry(key).or_default().insert(
                name,
                (
                    model::opt_int(r, 3).unwrap_or(0).max(0) as usize,
                    model::int(r, 4),
                ),
            );
        }
    })?;
    // The NCCL domain(s): named `NCCL` by their domain-create event.
    let nvtx = p.nvtx()?;
    let nccl_domains: Vec<i64> = nvtx
        .domains
        .iter()
        .filter(|(_, n)| n.as_str() == "NCCL")
        .map(|(d, _)| *d)
        .collect();
    out.nccl_ranges = nvtx
        .ranges
        .iter()
        .filter(|r| nccl_domains.contains(&r.domain))
        .count() as u64;
    let strings = p.strings()?;
    let sql = format!(
        "SELECT start, \"end\", globalTid, domainId, {}, {}, binaryData FROM {} WHERE binaryData IS NOT NULL",
        ev.col_or("text", "NULL"),
        ev.col_or("textId", "NULL"),
        ev.quoted()
    );
    let find = |fields: &HashMap<String, Field>, want: &dyn Fn(&str) -> bool| {
        fields
            .iter()
            .find(|(n, _)| want(&n.to_ascii_lowercase()))
            .map(|(_, f)| *f)
    };
    let mut any_blob = false;
    // (start, end, globalTid, domain, name, blob)
    type BlobRow = (i64, Option<i64>, i64, i64, String, Vec<u8>);
    let mut rows: Vec<BlobRow> = Vec::new();
    model::scan(p.conn(), &path, &sql, |r| {
        any_blob = true;
        let domain = model::int(r, 3);
        if !nccl_domains.is_empty() && !nccl_domains.contains(&domain) {
            return;
        }
        let name = model::text(r, 4)
            .or_else(|| model::opt_int(r, 5).map(|id| strings.get(id).to_string()))
            .unwrap_or_default();
        if !name.starts_with("nccl") {
            return;
        }
        let blob = match r.get_ref(6) {
            Ok(rusqlite::types::ValueRef::Blob(b)) => b.to_vec(),
            _ => return,
        };
        rows.push((
            model::int(r, 0),
            model::opt_int(r, 1),
            model::int(r, 2),
            domain,
            name,
            blob,
        ));
    })?;
    out.blobs_exported = any_blob;
    for (start, end, tid, domain, name, blob) in rows {
        let mut call = NcclCall {
            api: name,
            start_ns: start,
            end_ns: end.unwrap_or(start),
            global_tid: tid,
            comm: None,
            message_bytes: None,
            peer: None,
            root: None,
        };
        let mut init = None;
        for (schema, bytes) in split_blob(&blob) {
            let Some(fields) = schemas.get(&(domain, schema)) else {
                continue;
            };
            let get =
                |want: &dyn Fn(&str) -> bool| find(fields, want).and_then(|f| read_field(bytes, f));
            call.comm = call
                .comm
                .or(get(&|n| n.contains("communicator")).map(|v| v as u64));
            call.message_bytes = call
                .message_bytes
                .or(get(&|n| n.contains("message size") || n == "bytes"));
            call.peer = call.peer.or(get(&|n| n.contains("peer")));
            call.root = call.root.or(get(&|n| n == "root"));
            let ranks = get(&|n| n.contains("no. of ranks") || n == "nranks");
            if ranks.is_some() {
                init = Some((
                    ranks,
                    get(&|n| n == "rank"),
                    get(&|n| n.contains("cuda device")),
                ));
            }
        }
        match (init, call.comm) {
            (Some((ranks, rank, dev)), Some(comm)) if !out.comms.iter().any(|c| c.comm == comm) => {
                out.comms.push(NcclComm {
                    comm,
                    ranks,
                    rank,
                    cuda_device: dev,
                });
            }
            (Some(_), Some(_)) => {}
            _ if call.message_bytes.is_some() || call.peer.is_some() => out.calls.push(call),
            _ => {}
        }
    }
    out.calls.sort_by_key(|c| (c.start_ns, c.end_ns));
    Ok(out)
}

/// What NCCL recorded for one communication kernel.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct KernelMessage {
    /// Σ of the nccl-tests size `S` of the calls the kernel carries (one, or a group's).
    pub bytes: Option<i64>,
    /// The peer when every point-to-point call it carries has the same one.
    pub peer: Option<u32>,
    pub calls: u32,
    /// The collective of the calls when they agree (tells a send from a receive where NCCL runs both as
    /// one `SendRecv` kernel).
    pub collective: Option<Collective>,
}

/// Match NCCL calls to the kernels that carry them, per launching thread: a call whose range contains a
/// kernel launch is that launch's; calls that launched nothing (inside `ncclGroupStart/End`) go to the next
/// launch of the thread that no call contains (the group's end). `calls` and `launches` are (start, end,
/// thread) and (call start, thread, kernel index); returns kernel index → the calls' indices.
pub fn match_calls(
    calls: &[(i64, i64, i64)],
    launches: &[(i64, i64, u32)],
) -> HashMap<u32, Vec<usize>> {
    let mut by_thread: HashMap<i64, (Vec<usize>, Vec<usize>)> = HashMap::new();
    for (i, c) in calls.iter().enumerate() {
        by_thread.entry(c.2).or_default().0.push(i);
    }
    for (i, l) in launches.iter().enumerate() {
        if let Some(e) = by_thread.get_mut(&l.1) {
            e.1.push(i);
        }
    }
    let mut out: HashMap<u32, Vec<usize>> = HashMap::new();
    for (_, (mut cs, mut ls)) in by_thread {
        cs.sort_by_key(|&i| (calls[i].0, calls[i].1));
        ls.sort_by_key(|&i| launches[i].0);
        let mut pending: Vec<usize> = Vec::new();
        let mut li = 0;
        for &ci in &cs {
            let (s, e, _) = calls[ci];
            // Launches before this call: a pending group ends at the first of them.
            while li < ls.len() && launches[ls[li]].0 < s {
                if !pending.is_empty() {
                    out.entry(launches[ls[li]].2)
                        .or_default()
                        .append(&mut pending);
                }
                li += 1;
            }
            if li < ls.len() && launches[ls[li]].0 <= e {
                out.entry(launches[ls[li]].2).or_default().push(ci);
                // Further launches inside the same call carry nothing more.
                while li < ls.len() && launches[ls[li]].0 <= e {
                    li += 1;
                }
            } else {
                pending.push(ci);
            }
        }
        if !pending.is_empty() && li < ls.len() {
            out.entry(launches[ls[li]].2)
                .or_default()
                .append(&mut pending);
        }
    }
    out
}

/// Kernel index → the indices of the payload calls it carries.
pub fn matched_calls(p: &Profile, payloads: &NcclPayloads) -> Result<HashMap<u32, Vec<usize>>> {
    if payloads.calls.is_empty() {
        return Ok(HashMap::new());
    }
    let kernels = p.kernels()?;
    let api = p.api()?;
    let launches_idx = &p.launch_index()?.kernel_launch;
    let mut launches = Vec::new();
    for (ki, l) in launches_idx.iter().enumerate() {
        if let Some(ai) = l
            && super::nccl::is_nccl(p.string(kernels[ki].short_name))
        {
            let a = &api[*ai as usize];
            launches.push((a.start, a.global_tid, ki as u32));
        }
    }
    let calls: Vec<(i64, i64, i64)> = payloads
        .calls
        .iter()
        .map(|c| (c.start_ns, c.end_ns, c.global_tid))
        .collect();
    Ok(match_calls(&calls, &launches))
}

/// Kernel index → what NCCL recorded for it, for the NCCL kernels of an export with payloads.
pub fn kernel_messages(p: &Profile) -> Result<HashMap<u32, KernelMessage>> {
    let payloads = read(p)?;
    let mut out = HashMap::new();
    for (k, cis) in matched_calls(p, &payloads)? {
        let mut m = KernelMessage::default();
        let mut peers: Vec<i64> = Vec::new();
        let mut kinds: Vec<Collective> = cis
            .iter()
            .map(|&ci| payloads.calls[ci].collective())
            .collect();
        kinds.dedup();
        if kinds.len() == 1 {
            m.collective = Some(kinds[0]);
        }
        for &ci in &cis {
            let c = &payloads.calls[ci];
            m.calls += 1;
            if let Some(b) = c.size_s(payloads.ranks_of(c.comm)) {
                m.bytes = Some(m.bytes.unwrap_or(0) + b);
            }
            if let Some(pe) = c.peer {
                peers.push(pe);
            }
        }
        peers.dedup();
        if peers.len() == 1 && cis.len() == 1 {
            m.peer = u32::try_from(peers[0]).ok();
        }
        out.insert(k, m);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_go_to_the_launch_inside_them_and_groups_to_their_end() {
        // Thread 1: an all-reduce launching inside its range (launch at 15), then a group of a send and a recv
        // (ranges 30-32, 33-35) launched at the group end (40). Thread 2: a call that launched nothing, no launch.
        let calls = [(10, 20, 1), (30, 32, 1), (33, 35, 1), (50, 60, 2)];
        let launches = [(15, 1, 7), (40, 1, 9)];
        let m = match_calls(&calls, &launches);
        assert_eq!(m.get(&7), Some(&vec![0]));
        assert_eq!(m.get(&9), Some(&vec![1, 2]));
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn blobs_split_by_their_header() {
        // The all-reduce payload of the real capture: one payload, schema 0x01000005, 24 bytes at offset 32.
        let hex = "01000000000000000500000100000000180000000000000020000000000000007e54252af4ab746e00004000000000000000000000000000";
        let blob: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let parts = split_blob(&blob);
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].0, 16777221);
        assert_eq!(read_field(parts[0].1, (8, 22)), Some(4_194_304));
        assert_eq!(split_blob(&blob[..20]), Vec::<(i64, &[u8])>::new());
    }
}
