//! Process-wide state shared by every call: configuration, the store (opened
//! on first use), GPU availability (probed once), jobs, and the GPU queue.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::error::OpError;
use crate::jobs::JobManager;
use aisp_hw::gpu::GpuAvailability;
use aisp_store::Store;

pub struct AppState {
    pub config: Config,
    store: OnceLock<Result<Arc<Store>, OpError>>,
    /// Set when the store was found damaged at open and rebuilt.
    store_recovery: OnceLock<aisp_store::StoreRecovery>,
    gpu: OnceLock<GpuAvailability>,
    pub jobs: JobManager,
    /// Held by work that must have the GPU to itself (captures, benchmarks):
    /// concurrent runs distort each other's measurements.
    gpu_queue: Mutex<()>,
    /// Slots for calls that read user files (`limits.heavy_calls`).
    heavy_pool: Arc<tokio::sync::Semaphore>,
    /// Calls waiting for a heavy slot (for progress messages and `aisp_status`).
    pub heavy_waiting: std::sync::atomic::AtomicUsize,
    /// Decoded tables of recently used profiles (`limits.profile_tables_mib`).
    pub profile_tables: Arc<aisp_profile::loaded::TableCache>,
    /// Set by a server: after a profile question, the export's step ledger is built on another thread, so the
    /// session's questions that judge (rules, bottlenecks, ask) find it made. Off for one-shot CLI calls and
    /// tests, where nothing would ask for it.
    pub build_ahead: std::sync::atomic::AtomicBool,
    pub started_at: Instant,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl AppState {
    pub fn new(config: Config) -> Arc<AppState> {
        // The planners read Hugging Face configs through the library, which
        // reaches the Hub through this process's HTTP client.
        aisp_planner::hf::set_client(Box::new(crate::ops::hf::HubHttp));
        let heavy = config.heavy_calls.max(1);
        Arc::new(AppState {
            heavy_pool: Arc::new(tokio::sync::Semaphore::new(heavy)),
            heavy_waiting: std::sync::atomic::AtomicUsize::new(0),
            profile_tables: Arc::new(aisp_profile::loaded::TableCache::new(
                config.profile_tables_bytes,
            )),
            build_ahead: std::sync::atomic::AtomicBool::new(false),
            config,
            store: OnceLock::new(),
            store_recovery: OnceLock::new(),
            gpu: OnceLock::new(),
            jobs: JobManager::default(),
            gpu_queue: Mutex::new(()),
            started_at: Instant::now(),
        })
    }

    /// A state rooted in a fresh temporary directory (unit tests).
    pub fn for_tests() -> Arc<AppState> {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let home: PathBuf = std::env::temp_dir().join(format!(
            "aisp-test-{}-{}-{n}",
            std::process::id(),
            chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
        ));
        AppState::new(Config::with_home(home))
    }

    /// The store, opened (and migrated) on first use.
    pub fn store(&self) -> Result<&Arc<Store>, OpError> {
        let opened = self.store.get_or_init(|| {
            let (store, recovery) =
                Store::open_healing(&self.config.store_path(), aisp_store::MIGRATIONS)
                    .map_err(OpError::from)?;
            if let Some(r) = recovery {
                let _ = self.store_recovery.set(r);
            }
            let store = Arc::new(store);
            self.jobs.recover_orphans(&store);
            Ok(store)
        });
        opened.as_ref().map_err(Clone::clone)
    }

    /// What was done about a damaged store, if it was.
    pub fn store_recovery(&self) -> Option<&aisp_store::StoreRecovery> {
        self.store_recovery.get()
    }

    /// The pool that bounds concurrent file-reading calls.
    pub fn heavy_pool(&self) -> &Arc<tokio::sync::Semaphore> {
        &self.heavy_pool
    }

    /// GPU availability, probing on first use (blocks: call off the async runtime).
    pub fn gpu(&self) -> &GpuAvailability {
        self.gpu.get_or_init(GpuAvailability::probe)
    }

    /// Start the GPU probe on a background thread so the first call that needs
    /// it does not pay for it (the server does this at start).
    pub fn spawn_gpu_probe(self: &Arc<Self>) {
        let app = Arc::clone(self);
        std::thread::Builder::new()
            .name("aisp-gpu-probe".into())
            .spawn(move || {
                let g = app.gpu();
                tracing::info!(available = g.available, reason = ?g.reason, devices = g.devices.len(), "GPU probe finished");
            })
            .ok();
    }

    /// Replace the probe result (tests simulate hosts with and without GPUs).
    pub fn set_gpu_for_tests(&self, gpu: GpuAvailability) {
        let _ = self.gpu.set(gpu);
    }

    /// Wait for exclusive use of the GPU, giving up when `cancelled` says so.
    pub fn lock_gpu_queue(
        &self,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<MutexGuard<'_, ()>, OpError> {
        loop {
            match self.gpu_queue.try_lock() {
                Ok(guard) => return Ok(guard),
                Err(std::sync::TryLockError::Poisoned(p)) => return Ok(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => {
                    if cancelled() {
                        return Err(OpError::cancelled());
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }
}
