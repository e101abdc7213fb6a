//! Shared helpers for the profile integration tests: fixture paths, with the
//! `.xz` fixtures decompressed once into `target/` (pure-Rust `lzma-rs`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The repository's `tests/data`, from the manifest folder of the app (the
/// repository root) or of a library crate (`crates/<name>`).
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|d| d.join("tests").join("data"))
        .find(|d| d.is_dir())
        .expect("tests/data above the manifest folder")
}

static DECOMPRESS: Mutex<()> = Mutex::new(());

/// The path of a fixture by file name (`train_good.sqlite`, `ddp.sqlite`, ...).
/// `ddp.sqlite` and `infer_decode.sqlite` are decompressed from their `.xz`
/// into `$CARGO_TARGET_TMPDIR` on first use.
pub fn fixture(name: &str) -> PathBuf {
    let plain = data_dir().join(name);
    if plain.exists() {
        return plain;
    }
    let xz = data_dir().join(format!("{name}.xz"));
    assert!(xz.exists(), "no fixture {name} or {name}.xz in tests/data");
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("profile-fixtures");
    let out = out_dir.join(name);
    let _guard = DECOMPRESS.lock().unwrap_or_else(|p| p.into_inner());
    let xz_len = std::fs::metadata(&xz).unwrap().len();
    let stamp = out_dir.join(format!("{name}.from-{xz_len}"));
    if out.exists() && stamp.exists() {
        return out;
    }
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let mut input = std::io::BufReader::new(std::fs::File::open(&xz).unwrap());
    let tmp = out_dir.join(format!("{name}.tmp-{}", std::process::id()));
    // `name` may name a subfolder (`workloads/healthy.sqlite`).
    {
        let mut output = std::io::BufWriter::new(std::fs::File::create(&tmp).unwrap());
        lzma_rs::xz_decompress(&mut input, &mut output).expect("decompress fixture");
    }
    std::fs::rename(&tmp, &out).unwrap();
    std::fs::write(&stamp, b"").unwrap();
    out
}

/// A planted case (`tests/data/planted`): its export, or for a set of `ranks > 1` the folder its rank exports are
/// decompressed into.
pub fn planted(case: &str, ranks: usize) -> PathBuf {
    if ranks <= 1 {
        return fixture(&format!("planted/{case}.sqlite"));
    }
    let mut dir = None;
    for r in 0..ranks {
        let f = fixture(&format!("planted/{case}/rank{r}.sqlite"));
        dir = f.parent().map(Path::to_path_buf);
    }
    dir.expect("at least one rank")
}

pub fn open(name: &str) -> aisp_profile::Profile {
    aisp_profile::open(&fixture(name)).unwrap_or_else(|e| panic!("open {name}: {e}"))
}

/// Compare two floats printed with one decimal (nsys rounding ties may differ by 0.1).
pub fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol + 1e-9
}
