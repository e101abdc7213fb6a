//! `kernels`: the top kernels with their per-device split, duration
//! distribution (p50/p90/p99, nearest rank), launch configuration, and class
//! (see [`super::classify`]); time per class; and short (< 5 µs) kernels per
//! device.

use std::collections::BTreeMap;

// Integer keys hashed per kernel (hundreds of thousands at 1 GB): FxHash, not SipHash.
use rustc_hash::FxHashMap as HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::classify::{self, Classification, KernelClass};
use super::model::Kernel;
use super::stats::{self, pct1, pct2};
use super::summary::NameKey;
use super::{Profile, ResolvedScope, Result};

/// (grid, block, registers per thread, static and dynamic shared memory).
type LaunchConfig = ([u32; 3], [u32; 3], u32, u32, u32);

/// What `med_ns` and `p50_ns`/`p90_ns`/`p99_ns` are, said in every answer.
pub const STATISTICS: &str = "med_ns = median, the mean of the two middle durations for an even count \
(nsys stats); p50_ns/p90_ns/p99_ns = nearest-rank percentiles (the ⌈q·n⌉-th smallest duration, \
always an observed value); stddev_ns = sample (n−1)";

/// Kernels shorter than this are "short" (launch overhead dominates them).
pub const SHORT_KERNEL_NS: i64 = 5_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceShare {
    pub device: i64,
    pub instances: u64,
    pub total_ns: i64,
}

/// The most frequent launch configuration of a kernel group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Launch {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub registers_per_thread: u32,
    pub static_shared_bytes: u32,
    pub dynamic_shared_bytes: u32,
    /// Distinct (grid, block, registers, shared memory) configurations in the group.
    pub configurations: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KernelRow {
    pub name: String,
    /// The demangled name of the group's largest member, when `name` is a short name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub demangled: Option<String>,
    pub time_pct: f64,
    pub total_ns: i64,
    pub instances: u64,
    pub avg_ns: f64,
    /// Median: the mean of the two middle durations when the count is even (nsys stats' Med).
    pub med_ns: f64,
    pub min_ns: i64,
    pub max_ns: i64,
    pub stddev_ns: f64,
    /// Nearest-rank percentiles: always one observed duration, so `p50_ns` can differ from
    /// `med_ns` (the middle-pair mean) for an even count.
    pub p50_ns: i64,
    pub p90_ns: i64,
    pub p99_ns: i64,
    /// Per device (left out of default `aisp_profile_kernels` answers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_device: Vec<DeviceShare>,
    pub launch: Launch,
    /// Where the step ledger puts the group's time (its largest member's): a compute column (`gemm_tensor_core`,
    /// `gemm_fp32_simt`, `gemm_other`, `attention`, `elementwise`, `reduction`, `optimizer`, `copy_kernel`,
    /// `other_kernel`) or `communication`; the vocabulary of `aisp_profile_ledger` and the findings.
    #[serde(default)]
    pub ledger_class: String,
    pub class: Classification,
}

/// Kernel time per ledger class ([`KernelRow::ledger_class`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LedgerClassShare {
    pub ledger_class: String,
    pub instances: u64,
    pub total_ns: i64,
    /// Share of all kernel time in scope.
    pub time_pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClassShare {
    pub class: KernelClass,
    pub instances: u64,
    pub total_ns: i64,
    /// Share of all kernel time in scope.
    pub time_pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceKernels {
    pub device: i64,
    pub kernels: u64,
    pub total_ns: i64,
    /// Kernels shorter than 5 µs.
    pub short_kernels: u64,
    pub short_total_ns: i64,
    /// short_kernels / kernels × 100.
    pub short_count_pct: f64,
    /// short_total_ns / total_ns × 100.
    pub short_time_pct: f64,
}

/// How `kernels` groups and names kernels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KernelNames {
    /// The short name, with the operation PyTorch's generic launchers carry in brackets
    /// (`vectorized_elementwise_kernel[pow_tensor_scalar_kernel_impl]`): what a kernel computes without its
    /// template arguments, so that an add and a cast through the same launcher are two rows.
    #[default]
    Operation,
    /// `shortName` (nsys `:base`), e.g. `vectorized_elementwise_kernel`.
    Short,
    /// `demangledName` (the `nsys stats` default), with template arguments.
    Demangled,
}

impl From<NameKey> for KernelNames {
    fn from(k: NameKey) -> Self {
        match k {
            NameKey::Short => KernelNames::Short,
            NameKey::Demangled => KernelNames::Demangled,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Kernels {
    pub names: KernelNames,
    /// How the per-row statistics are defined (the median and p50 differ by method).
    pub statistics: String,
    pub kernels: u64,
    pub total_ns: i64,
    /// Groups before `limit`.
    pub rows_total: usize,
    pub rows: Vec<KernelRow>,
    /// Time per kernel class (the classifier's: what the name and launch say the kernel is).
    pub classes: Vec<ClassShare>,
    /// Time per ledger class (where the step ledger puts it: the classes above with the optimizer apart and
    /// collectives as communication).
    #[serde(default)]
    pub ledger_classes: Vec<LedgerClassShare>,
    pub devices: Vec<DeviceKernels>,
}

/// Classification per demangled-name id, computed once per profile and call.
pub struct Classifier<'p> {
    p: &'p Profile,
    cache: HashMap<i64, Classification>,
}

impl<'p> Classifier<'p> {
    pub fn new(p: &'p Profile) -> Self {
        Classifier {
            p,
            cache: HashMap::default(),
        }
    }
    pub fn of(&mut self, k: &Kernel) -> &Classification {
        let p = self.p;
        self.cache.entry(k.demangled_name).or_insert_with(|| {
            classify::classify(
                p.string(k.demangled_name),
                p.string(k.short_name),
                k.grid,
                k.block,
            )
        })
    }
}

pub fn kernels(
    p: &Profile,
    scope: &ResolvedScope,
    names: impl Into<KernelNames>,
    limit: usize,
) -> Result<Kernels> {
    let names = names.into();
    let ks: Vec<&Kernel> = p
        .kernels()?
        .iter()
        .filter(|k| scope.admits(k.device, k.global_pid, k.start, k.end))
        .collect();
    let mut classifier = Classifier::new(p);
    // Groups keyed by a string id of the export (hundreds of thousands of kernels at 1 GB: no string per kernel).
    // By operation, the key is the first demangled id met with the group's label, and the label its name.
    let mut groups: HashMap<i64, Vec<&Kernel>> = HashMap::default();
    let mut op_key: HashMap<i64, i64> = HashMap::default();
    let mut key_of_label: std::collections::HashMap<String, i64> = Default::default();
    let mut label_of: HashMap<i64, String> = HashMap::default();
    for k in &ks {
        let key = match names {
            KernelNames::Short => k.short_name,
            KernelNames::Demangled => k.demangled_name,
            KernelNames::Operation => *op_key.entry(k.demangled_name).or_insert_with(|| {
                let label = match p.string(k.demangled_name) {
                    "" => p.string(k.short_name).to_string(),
                    d => classify::kernel_label(d),
                };
                let key = *key_of_label
                    .entry(label.clone())
                    .or_insert(k.demangled_name);
                label_of.entry(key).or_insert(label);
                key
            }),
        };
        groups.entry(key).or_default().push(k);
    }
    let total: i64 = ks.iter().map(|k| k.dur()).sum();
    let mut rows: Vec<KernelRow> = groups
        .into_iter()
        .map(|(id, members)| {
            let name = match names {
                KernelNames::Operation => label_of.remove(&id).unwrap_or_default(),
                _ => p.string(id).to_string(),
            };
            let mut d: Vec<i64> = members.iter().map(|k| k.dur()).collect();
            let s = stats::stats(&mut d);
            d.sort_unstable();
            let mut per_dev: BTreeMap<i64, (u64, i64)> = BTreeMap::new();
            let mut by_demangled: HashMap<i64, i64> = HashMap::default();
            let mut configs: HashMap<LaunchConfig, u64> = HashMap::default();
            for k in &members {
                let e = per_dev.entry(k.device).or_default();
                e.0 += 1;
                e.1 += k.dur();
                *by_demangled.entry(k.demangled_name).or_default() += k.dur();
                *configs
                    .entry((k.grid, k.block, k.registers, k.static_smem, k.dynamic_smem))
                    .or_default() += 1;
            }
            let main_demangled = by_demangled
                .iter()
                .max_by_key(|(id, t)| (**t, std::cmp::Reverse(**id)))
                .map(|(id, _)| *id)
                .unwrap_or(members[0].demangled_name);
            let representative = members
                .iter()
                .find(|k| k.demangled_name == main_demangled)
                .copied()
                .unwrap_or(members[0]);
            let main_demangled = p.string(main_demangled);
            let ((grid, block, regs, ssm, dsm), _) = configs
                .iter()
                .max_by_key(|(cfg, n)| (**n, std::cmp::Reverse(**cfg)))
                .map(|(c, n)| (*c, *n))
                .unwrap_or((([0; 3], [0; 3], 0, 0, 0), 0));
            KernelRow {
                demangled: (names != KernelNames::Demangled && main_demangled != name)
                    .then(|| main_demangled.to_string()),
                name,
                time_pct: pct1(s.total, total),
                total_ns: s.total,
                instances: s.count,
                avg_ns: s.avg,
                med_ns: s.med,
                min_ns: s.min,
                max_ns: s.max,
                stddev_ns: s.stddev,
                p50_ns: stats::percentile_sorted(&d, 50.0),
                p90_ns: stats::percentile_sorted(&d, 90.0),
                p99_ns: stats::percentile_sorted(&d, 99.0),
                per_device: per_dev
                    .into_iter()
                    .map(|(device, (n, t))| DeviceShare {
                        device,
                        instances: n,
                        total_ns: t,
                    })
                    .collect(),
                launch: Launch {
                    grid,
                    block,
                    registers_per_thread: regs,
                    static_shared_bytes: ssm,
                    dynamic_shared_bytes: dsm,
                    configurations: configs.len() as u64,
                },
                ledger_class: super::ledger::kernel_ledger_class(
                    p.string(representative.short_name),
                    classifier.of(representative).class,
                    p.string(representative.demangled_name),
                )
                .to_string(),
                class: classifier.of(representative).clone(),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then(a.instances.cmp(&b.instances))
            .then(a.name.cmp(&b.name))
    });
    let rows_total = rows.len();
    rows.truncate(limit);
    // Classes over every kernel (by its own demangled name).
    let mut classes: BTreeMap<KernelClass, (u64, i64)> = BTreeMap::new();
    let mut ledger_classes: BTreeMap<&'static str, (u64, i64)> = BTreeMap::new();
    let mut ledger_class_of: HashMap<i64, &'static str> = HashMap::default();
    let mut devices: BTreeMap<i64, DeviceKernels> = BTreeMap::new();
    for k in &ks {
        let c = classifier.of(k).class;
        let e = classes.entry(c).or_default();
        e.0 += 1;
        e.1 += k.dur();
        // Once per demangled name, as the ledger reads it (hundreds of thousands of kernels at 1 GB).
        let lc = *ledger_class_of.entry(k.demangled_name).or_insert_with(|| {
            super::ledger::kernel_ledger_class(
                p.string(k.short_name),
                c,
                p.string(k.demangled_name),
            )
        });
        let e = ledger_classes.entry(lc).or_default();
        e.0 += 1;
        e.1 += k.dur();
        let d = devices.entry(k.device).or_insert_with(|| DeviceKernels {
            device: k.device,
            kernels: 0,
            total_ns: 0,
            short_kernels: 0,
            short_total_ns: 0,
            short_count_pct: 0.0,
            short_time_pct: 0.0,
        });
        d.kernels += 1;
        d.total_ns += k.dur();
        if k.dur() < SHORT_KERNEL_NS {
            d.short_kernels += 1;
            d.short_total_ns += k.dur();
        }
    }
    let mut classes: Vec<ClassShare> = classes
        .into_iter()
        .map(|(class, (n, t))| ClassShare {
            class,
            instances: n,
            total_ns: t,
            time_pct: pct1(t, total),
        })
        .collect();
    classes.sort_by_key(|c| std::cmp::Reverse(c.total_ns));
    let mut ledger_classes: Vec<LedgerClassShare> = ledger_classes
        .into_iter()
        .map(|(c, (n, t))| LedgerClassShare {
            ledger_class: c.to_string(),
            instances: n,
            total_ns: t,
            time_pct: pct1(t, total),
        })
        .collect();
    ledger_classes.sort_by_key(|c| std::cmp::Reverse(c.total_ns));
    let devices = devices
        .into_values()
        .map(|mut d| {
            d.short_count_pct = pct2(d.short_kernels as i64, d.kernels as i64);
            d.short_time_pct = pct2(d.short_total_ns, d.total_ns);
            d
        })
        .collect();
    Ok(Kernels {
        names,
        statistics: STATISTICS.into(),
        kernels: ks.len() as u64,
        total_ns: total,
        rows_total,
        rows,
        classes,
        ledger_classes,
        devices,
    })
}
