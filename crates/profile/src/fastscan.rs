//! A read-only reader of SQLite table b-trees for the few large event tables
//! (OS runtime calls, CUDA API calls, kernels) that dominate the time to read
//! an export. Stepping SQLite's virtual machine costs 100–300 ns per row; this
//! decodes the integer columns straight from the leaf pages (documented in
//! <https://www.sqlite.org/fileformat2.html>) at a few tens of ns per row, in
//! parallel over the leaf pages, reading pages with `pread` (no mapping of
//! the whole file, so memory stays flat).
//!
//! It is only ever a fast path: anything unexpected (a WAL-mode database, a
//! page that is not a table b-tree page, a cell that runs off its page, an
//! unknown serial type) is an error, and the caller falls back to SQL. It never
//! panics on malformed input: every slice access is checked.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Why the fast path gave up (the caller then uses SQL).
#[derive(Debug)]
pub struct Unsupported(pub String);

type R<T> = std::result::Result<T, Unsupported>;

fn bad<T>(msg: impl Into<String>) -> R<T> {
    Err(Unsupported(msg.into()))
}

/// Page geometry from the database header.
#[derive(Debug, Clone, Copy)]
pub struct Geometry {
    pub page_size: usize,
    /// Page size minus the reserved bytes at the end of each page.
    pub usable: usize,
    pub pages: u64,
}

impl Geometry {
    pub fn read(file: &File, path: &Path) -> R<Geometry> {
        let mut head = [0u8; 100];
        file.read_exact_at(&mut head, 0)
            .map_err(|e| Unsupported(format!("{}: {e}", path.display())))?;
        if &head[..16] != b"SQLite format 3\0" {
            return bad("not an SQLite file");
        }
        // WAL mode: the latest pages may live in the -wal file; leave that to SQLite.
        if head[18] == 2 || head[19] == 2 {
            let wal = path.with_extension(format!(
                "{}-wal",
                path.extension().and_then(|e| e.to_str()).unwrap_or("")
            ));
            if wal.exists() {
                return bad("WAL-mode database with a -wal file");
            }
        }
        let raw = u16::from_be_bytes([head[16], head[17]]) as usize;
        let page_size = if raw == 1 { 65536 } else { raw };
        if !(512..=65536).contains(&page_size) || !page_size.is_power_of_two() {
            return bad("bad page size");
        }
        let reserved = head[20] as usize;
        // SQLite's own floor: a usable page of at least 480 bytes.
        if page_size - reserved < 480 {
            return bad("reserved bytes leave too little of each page");
        }
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        let file_pages = len / page_size as u64;
        // The header's page count counts when its "version valid for" matches
        // the change counter; SQLite then refuses a file shorter than that
        // (a truncated copy), and so do we.
        let be32 = |o: usize| u32::from_be_bytes([head[o], head[o + 1], head[o + 2], head[o + 3]]);
        let in_header = be32(28) as u64;
        let pages = if in_header > 0 && be32(92) == be32(24) {
            if in_header > file_pages {
                return bad("the file is shorter than its header says (truncated)");
            }
            in_header
        } else {
            file_pages
        };
        Ok(Geometry {
            page_size,
            usable: page_size - reserved,
            pages,
        })
    }
}

fn varint(b: &[u8], mut i: usize) -> R<(u64, usize)> {
    let mut v: u64 = 0;
    for n in 0..9 {
        let Some(&c) = b.get(i) else {
            return bad("varint runs off the page");
        };
        i += 1;
        if n == 8 {
            return Ok(((v << 8) | c as u64, i));
        }
        v = (v << 7) | (c & 0x7f) as u64;
        if c & 0x80 == 0 {
            return Ok((v, i));
        }
    }
    bad("varint too long")
}

fn read_page(file: &File, g: &Geometry, page: u32, buf: &mut [u8]) -> R<()> {
    if page == 0 || page as u64 > g.pages {
        return bad(format!("page {page} out of range"));
    }
    file.read_exact_at(buf, (page as u64 - 1) * g.page_size as u64)
        .map_err(|e| Unsupported(format!("read page {page}: {e}")))
}

/// Child page numbers of an interior table page, left to right (right-most last).
fn children(buf: &[u8], h: usize) -> R<Vec<u32>> {
    let n = u16::from_be_bytes([buf[h + 3], buf[h + 4]]) as usize;
    let right = u32::from_be_bytes([buf[h + 8], buf[h + 9], buf[h + 10], buf[h + 11]]);
    let ptrs = h + 12;
    let mut out = Vec::with_capacity(n + 1);
    for c in 0..n {
        let Some(p) = buf.get(ptrs + 2 * c..ptrs + 2 * c + 2) else {
            return bad("cell pointer off the page");
        };
        let off = u16::from_be_bytes([p[0], p[1]]) as usize;
        let Some(child) = buf.get(off..off + 4) else {
            return bad("cell off the page");
        };
        out.push(u32::from_be_bytes([child[0], child[1], child[2], child[3]]));
    }
    out.push(right);
    Ok(out)
}

/// Leaf pages of the table b-tree rooted at `root`, in key order.
///
/// SQLite b-trees are balanced (every leaf at the same depth), so only the
/// interior pages are read here: the children of the last interior level are
/// the leaves, and each leaf's type is checked when it is decoded.
pub fn leaf_pages(file: &File, g: &Geometry, root: u32) -> R<Vec<u32>> {
    let mut buf = vec![0u8; g.page_size];
    // Height: follow the left-most path.
    let mut height = 0usize;
    let mut page = root;
    loop {
        read_page(file, g, page, &mut buf)?;
        let h = if page == 1 { 100 } else { 0 };
        match buf.get(h) {
            Some(0x0d) => break,
            Some(0x05) => {
                height += 1;
                if height > 64 {
                    return bad("b-tree too deep");
                }
                page = children(&buf, h)?[0];
            }
            _ => return bad(format!("page {page} is not a table b-tree page")),
        }
    }
    let mut level = vec![root];
    for _ in 0..height {
        let mut next = Vec::new();
        for &p in &level {
            read_page(file, g, p, &mut buf)?;
            let h = if p == 1 { 100 } else { 0 };
            if buf.get(h) != Some(&0x05) {
                return bad(format!("page {p} should be an interior table page"));
            }
            next.extend(children(&buf, h)?);
            if next.len() as u64 > g.pages {
                return bad("more children than pages");
            }
        }
        level = next;
    }
    Ok(level)
}

/// The integer value of a column (NULL, floats, text and blobs read as 0).
#[inline(always)]
fn int_value(serial: u64, b: &[u8]) -> i64 {
    match serial {
        1 => b[0] as i8 as i64,
        2 => i16::from_be_bytes([b[0], b[1]]) as i64,
        3 => ((((b[0] as i32) << 24) | ((b[1] as i32) << 16) | ((b[2] as i32) << 8)) >> 8) as i64,
        4 => i32::from_be_bytes([b[0], b[1], b[2], b[3]]) as i64,
        5 => {
            let v = ((b[0] as i64) << 40)
                | ((b[1] as i64) << 32)
                | ((b[2] as i64) << 24)
                | ((b[3] as i64) << 16)
                | ((b[4] as i64) << 8)
                | b[5] as i64;
            (v << 16) >> 16
        }
        6 => i64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        7 => f64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as i64,
        9 => 1,
        _ => 0,
    }
}

#[inline(always)]
fn serial_len(serial: u64) -> R<usize> {
    Ok(match serial {
        0 | 8 | 9 => 0,
        1 => 1,
        2 => 2,
        3 => 3,
        4 => 4,
        5 => 6,
        6 | 7 => 8,
        10 | 11 => return bad("reserved serial type"),
        n if n % 2 == 0 => ((n - 12) / 2) as usize,
        n => ((n - 13) / 2) as usize,
    })
}

/// A varint whose first byte is under 0x80 is that byte: the common case.
#[inline(always)]
fn varint_fast(b: &[u8], i: usize) -> R<(u64, usize)> {
    match b.get(i) {
        Some(&c) if c < 0x80 => Ok((c as u64, i + 1)),
        _ => varint(b, i),
    }
}

/// Decode the wanted integer columns (`slots[col]` = index in `vals`, or
/// `u8::MAX`) of every row on a leaf page and call `row` with `vals`.
#[allow(clippy::too_many_arguments)]
fn decode_leaf<F: FnMut(&[i64])>(
    file: &File,
    g: &Geometry,
    page: u32,
    buf: &[u8],
    slots: &[u8],
    vals: &mut [i64],
    overflow: &mut Vec<u8>,
    row: &mut F,
) -> R<()> {
    let h = if page == 1 { 100 } else { 0 };
    if buf.get(h) != Some(&0x0d) {
        return bad("not a leaf page");
    }
    let n = u16::from_be_bytes([buf[h + 3], buf[h + 4]]) as usize;
    let u = g.usable;
    let max_local = u - 35;
    let min_local = ((u - 12) * 32 / 255) - 23;
    let ncols = slots.len();
    for c in 0..n {
        let Some(p) = buf.get(h + 8 + 2 * c..h + 10 + 2 * c) else {
            return bad("cell pointer off the page");
        };
        let off = u16::from_be_bytes([p[0], p[1]]) as usize;
        let (payload, i) = varint_fast(buf, off)?;
        let (_rowid, i) = varint(buf, i)?;
        let payload = payload as usize;
        let record: &[u8] = if payload <= max_local {
            let Some(r) = buf.get(i..i + payload) else {
                return bad("cell runs off the page");
            };
            r
        } else {
            // Spilled to overflow pages: assemble the whole payload.
            let k = min_local + (payload - min_local) % (u - 4);
            let local = if k <= max_local { k } else { min_local };
            let Some(first) = buf.get(i..i + local) else {
                return bad("cell runs off the page");
            };
            let Some(next) = buf.get(i + local..i + local + 4) else {
                return bad("overflow pointer off the page");
            };
            overflow.clear();
            overflow.extend_from_slice(first);
            let mut next = u32::from_be_bytes([next[0], next[1], next[2], next[3]]);
            let mut page_buf = vec![0u8; g.page_size];
            let mut hops = 0u64;
            while overflow.len() < payload {
                hops += 1;
                if next == 0 || hops > g.pages {
                    return bad("broken overflow chain");
                }
                read_page(file, g, next, &mut page_buf)?;
                let take = (payload - overflow.len()).min(u - 4);
                overflow.extend_from_slice(&page_buf[4..4 + take]);
                next = u32::from_be_bytes([page_buf[0], page_buf[1], page_buf[2], page_buf[3]]);
            }
            overflow.as_slice()
        };
        let (hlen, mut hi) = varint_fast(record, 0)?;
        let hlen = hlen as usize;
        if hlen > record.len() {
            return bad("record header runs off the record");
        }
        let mut body = hlen;
        let mut col = 0usize;
        vals.fill(0);
        while hi < hlen && col < ncols {
            let (serial, nh) = varint_fast(record, hi)?;
            hi = nh;
            let len = serial_len(serial)?;
            let slot = slots[col];
            if slot != u8::MAX {
                let Some(bytes) = record.get(body..body + len) else {
                    return bad("value runs off the record");
                };
                vals[slot as usize] = int_value(serial, bytes);
            }
            body += len;
            col += 1;
        }
        row(vals);
    }
    Ok(())
}

/// Scan the integer columns `cols` (positions in the table's column order) of
/// the table rooted at `root`, on up to `threads` threads. Each thread starts
/// from `init()` and folds rows with `row`; the per-thread accumulators are
/// returned in leaf order (thread 0 holds the first pages), so callers that
/// need key order can concatenate them.
pub fn scan<A, I, F>(
    path: &Path,
    root: u32,
    cols: &[usize],
    threads: usize,
    init: I,
    row: F,
) -> R<Vec<A>>
where
    A: Send,
    I: Fn() -> A + Sync,
    F: Fn(&mut A, &[i64]) + Sync,
{
    scan_reporting(path, root, cols, threads, None, init, row)
}

/// [`scan`], reporting the leaf pages read through `progress` (labelled
/// `table`) once the scan has run longer than the progress threshold.
pub fn scan_reporting<A, I, F>(
    path: &Path,
    root: u32,
    cols: &[usize],
    threads: usize,
    progress: Option<(&str, &aisp_base::Progress)>,
    init: I,
    row: F,
) -> R<Vec<A>>
where
    A: Send,
    I: Fn() -> A + Sync,
    F: Fn(&mut A, &[i64]) + Sync,
{
    let (file, _) = crate::input_file::open_regular(path)
        .map_err(|e| Unsupported(format!("{}: {e}", path.display())))?;
    let g = Geometry::read(&file, path)?;
    // Column position → slot in the row handed to `row` (each wanted column once).
    let width = cols
        .iter()
        .copied()
        .filter(|&c| c != usize::MAX)
        .max()
        .map_or(0, |m| m + 1);
    if width > 250 || cols.len() > 250 {
        return bad("too many columns");
    }
    let mut slots = vec![u8::MAX; width];
    for (k, &c) in cols.iter().enumerate() {
        if c != usize::MAX {
            if slots[c] != u8::MAX {
                return bad("a column is asked for twice");
            }
            slots[c] = k as u8;
        }
    }
    let slots = &slots;
    let leaves = leaf_pages(&file, &g, root)?;
    let threads = threads.clamp(1, 16).min(leaves.len().max(1));
    let chunk = leaves.len().div_ceil(threads).max(1);
    let pages_done = std::sync::atomic::AtomicU64::new(0);
    let pages_done = &pages_done;
    let work = |pages: &[u32]| -> R<A> {
        let mut acc = init();
        let mut buf = vec![0u8; g.page_size];
        let mut vals = vec![0i64; cols.len()];
        let mut overflow = Vec::new();
        // Read runs of consecutive pages in one call.
        let mut i = 0;
        let mut big: Vec<u8> = Vec::new();
        while i < pages.len() {
            let mut j = i + 1;
            // At most 1 MiB per read (256 pages of 4 KiB, 16 of 64 KiB): with
            // up to 16 scan threads the buffers stay at 16 MiB whatever the page size.
            let run_max = ((1 << 20) / g.page_size).max(1);
            while j < pages.len() && pages[j] == pages[j - 1] + 1 && j - i < run_max {
                j += 1;
            }
            if j - i > 1 {
                if big.len() < (j - i) * g.page_size {
                    big.resize((j - i) * g.page_size, 0);
                }
                let big = &mut big[..(j - i) * g.page_size];
                if pages[j - 1] as u64 > g.pages {
                    return bad("page out of range");
                }
                file.read_exact_at(big, (pages[i] as u64 - 1) * g.page_size as u64)
                    .map_err(|e| Unsupported(format!("read: {e}")))?;
                for (k, &pg) in pages[i..j].iter().enumerate() {
                    let b = &big[k * g.page_size..(k + 1) * g.page_size];
                    decode_leaf(
                        &file,
                        &g,
                        pg,
                        b,
                        slots,
                        &mut vals,
                        &mut overflow,
                        &mut |v| row(&mut acc, v),
                    )?;
                }
            } else {
                read_page(&file, &g, pages[i], &mut buf)?;
                decode_leaf(
                    &file,
                    &g,
                    pages[i],
                    &buf,
                    slots,
                    &mut vals,
                    &mut overflow,
                    &mut |v| row(&mut acc, v),
                )?;
            }
            pages_done.fetch_add((j - i) as u64, std::sync::atomic::Ordering::Relaxed);
            i = j;
        }
        Ok(acc)
    };
    if threads == 1 && progress.is_none() {
        return Ok(vec![work(&leaves)?]);
    }
    let total = leaves.len() as u64;
    std::thread::scope(|s| {
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let handles: Vec<_> = leaves
            .chunks(chunk)
            .map(|c| {
                let done_tx = done_tx.clone();
                s.spawn(move || {
                    let out = work(c);
                    let _ = done_tx.send(());
                    out
                })
            })
            .collect();
        drop(done_tx);
        // Progress is reported from the calling thread (the operation's),
        // while the workers read pages.
        if let Some((table, p)) = progress {
            let started = std::time::Instant::now();
            let mut finished = 0;
            while finished < handles.len() {
                match done_rx.recv_timeout(std::time::Duration::from_millis(100)) {
                    Ok(()) => finished += 1,
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                }
                if started.elapsed() >= p.after {
                    p.tick(
                        table,
                        pages_done.load(std::sync::atomic::Ordering::Relaxed),
                        total,
                    );
                }
            }
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| bad("scan thread failed")))
            .collect()
    })
}

/// How many threads a scan should use: the machine's parallelism, at most
/// 16. Decoding and folding the big tables is CPU-bound (the page cache
/// delivers a 1 GB export in 0.2 s), so every core shortens the first question.
pub fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn data(name: &str) -> PathBuf {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("tests/data")
            .join(name)
    }

    /// Every integer column of every event table, fast path vs SQLite, row for row.
    #[test]
    fn fast_scan_reads_exactly_what_sqlite_reads() {
        for name in [
            "train_good.sqlite",
            "h100_2gpu_1s.sqlite",
            "mock.sqlite",
            "healthy_1pct.sqlite",
            "h200_matmul_small.sqlite",
        ] {
            let path = data(name);
            let conn = rusqlite::Connection::open_with_flags(
                &path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .unwrap();
            let schema = crate::schema::Schema::load(&conn, &path).unwrap();
            let mut checked = 0;
            for t in schema.table_names() {
                let info = schema.exact(&t).unwrap();
                if !info.has("start") || info.rootpage == 0 {
                    continue;
                }
                let cols: Vec<usize> = (0..info.columns.len()).collect();
                let fast: Vec<Vec<i64>> = scan(
                    &path,
                    info.rootpage,
                    &cols,
                    3,
                    Vec::new,
                    |a: &mut Vec<Vec<i64>>, v| a.push(v.to_vec()),
                )
                .unwrap_or_else(|e| panic!("{name} {t}: {}", e.0))
                .into_iter()
                .flatten()
                .collect();
                let list: Vec<String> = info.columns.iter().map(|c| format!("\"{c}\"")).collect();
                let mut stmt = conn
                    .prepare(&format!(
                        "SELECT {} FROM \"{t}\" ORDER BY rowid",
                        list.join(",")
                    ))
                    .unwrap();
                let mut rows = stmt.raw_query();
                let mut slow = Vec::new();
                while let Some(r) = rows.next().unwrap() {
                    slow.push(
                        (0..cols.len())
                            .map(|i| crate::model::int(r, i))
                            .collect::<Vec<i64>>(),
                    );
                }
                assert_eq!(fast.len(), slow.len(), "{name} {t}");
                assert!(fast == slow, "{name} {t}: values differ");
                checked += 1;
            }
            assert!(checked >= 1, "{name}");
        }
    }

    /// Damaged pages make the fast path give up (or read garbage numbers), never panic.
    #[test]
    fn damaged_files_never_panic() {
        let good = std::fs::read(data("train_good.sqlite")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let conn = rusqlite::Connection::open_with_flags(
            data("train_good.sqlite"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        let root: u32 = conn
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE name='OSRT_API'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for round in 0..40 {
            let mut bad = good.clone();
            for _ in 0..200 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let i = (x as usize) % bad.len();
                if i >= 100 {
                    bad[i] = (x >> 32) as u8;
                }
            }
            let p = dir.path().join(format!("bad{round}.sqlite"));
            std::fs::write(&p, &bad).unwrap();
            let _ = scan(
                &p,
                root,
                &[0, 1, 2, 3, 4],
                2,
                || 0u64,
                |a: &mut u64, _| *a += 1,
            );
        }
        let p = dir.path().join("short.sqlite");
        std::fs::write(&p, &good[..good.len() / 3]).unwrap();
        assert!(scan(&p, root, &[0, 1], 1, || 0u64, |a: &mut u64, _| *a += 1).is_err());
    }

    #[test]
    fn varints_and_serial_types_decode() {
        assert_eq!(varint(&[0x7f], 0).unwrap(), (127, 1));
        assert_eq!(varint(&[0x81, 0x00], 0).unwrap(), (128, 2));
        assert_eq!(varint(&[0xff; 9], 0).unwrap().0, u64::MAX);
        assert!(varint(&[0x80], 0).is_err());
        assert_eq!(int_value(1, &[0xff]), -1);
        assert_eq!(int_value(3, &[0xff, 0xff, 0xfe]), -2);
        assert_eq!(int_value(5, &[0, 0, 0, 1, 0, 0]), 65536);
        assert_eq!(int_value(5, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff]), -1);
        assert_eq!(int_value(9, &[]), 1);
        assert_eq!(serial_len(13 + 2 * 5).unwrap(), 5);
        assert!(serial_len(10).is_err());
    }
}
