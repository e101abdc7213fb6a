//! Every store migration, grouped by component. Append new versions of a
//! component below its last one; never edit a migration that has shipped.

use super::Migration;

pub const MIGRATIONS: &[Migration] = &[
    // Background jobs of long-running operations (`async: true`).
    Migration {
        component: "jobs",
        version: 1,
        sql: "CREATE TABLE jobs (
                id TEXT PRIMARY KEY,
                tool TEXT NOT NULL,
                state TEXT NOT NULL CHECK (state IN ('queued','running','succeeded','failed','cancelled')),
                arguments TEXT NOT NULL,
                progress TEXT,
                result TEXT,
                error TEXT,
                created_at TEXT NOT NULL,
                started_at TEXT,
                finished_at TEXT,
                pid INTEGER NOT NULL
            );
            CREATE INDEX jobs_created ON jobs (created_at);",
    },
    // Benchmark and hardware-roof results: one row per measured variant.
    // The analyze domain (pareto, scaling, leaderboards, power) reads this table.
    Migration {
        component: "benchmark",
        version: 1,
        sql: "CREATE TABLE benchmark_results (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                run_id TEXT NOT NULL,
                created_at TEXT NOT NULL,
                target TEXT NOT NULL,
                variant TEXT NOT NULL,
                role TEXT NOT NULL,
                verified INTEGER NOT NULL,
                failure TEXT,
                size TEXT,
                median_ms REAL,
                p10_ms REAL,
                p90_ms REAL,
                min_ms REAL,
                cv_pct REAL,
                repetitions INTEGER,
                metric TEXT,
                value REAL,
                pct_of_roof REAL,
                pct_of_datasheet REAL,
                energy_j REAL,
                peak_memory_bytes INTEGER,
                device_index INTEGER,
                device_name TEXT,
                device_uuid TEXT,
                compute_capability TEXT,
                sm_clock_start_mhz INTEGER,
                sm_clock_end_mhz INTEGER,
                mem_clock_start_mhz INTEGER,
                mem_clock_end_mhz INTEGER,
                throttle_reasons TEXT,
                driver_version TEXT,
                cuda_driver_version TEXT,
                nvrtc_version TEXT,
                host TEXT,
                details TEXT
            );
            CREATE INDEX benchmark_results_run ON benchmark_results (run_id);
            CREATE INDEX benchmark_results_target ON benchmark_results (target, variant, created_at);",
    },
    // Benchmark results, version 2: which tool wrote the row, its status
    // (ok/failed/skipped), the roof and datasheet figures behind the
    // percentages, the raw samples (for significance tests across runs), the
    // input seed, the size class and the cuBLAS version.
    Migration {
        component: "benchmark",
        version: 2,
        sql: "ALTER TABLE benchmark_results ADD COLUMN tool TEXT;
            ALTER TABLE benchmark_results ADD COLUMN status TEXT;
            ALTER TABLE benchmark_results ADD COLUMN roof TEXT;
            ALTER TABLE benchmark_results ADD COLUMN roof_value REAL;
            ALTER TABLE benchmark_results ADD COLUMN datasheet_value REAL;
            ALTER TABLE benchmark_results ADD COLUMN samples_ms TEXT;
            ALTER TABLE benchmark_results ADD COLUMN seed INTEGER;
            ALTER TABLE benchmark_results ADD COLUMN size_class TEXT;
            ALTER TABLE benchmark_results ADD COLUMN cublas_version TEXT;
            CREATE INDEX benchmark_results_device ON benchmark_results (device_uuid, target, variant);",
    },
    // Conversations of `aisp_ask`: one row per conversation, one per answered question.
    Migration {
        component: "ai",
        version: 1,
        sql: "CREATE TABLE ai_conversations (
                id TEXT PRIMARY KEY,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL
            );
            CREATE TABLE ai_turns (
                conversation_id TEXT NOT NULL REFERENCES ai_conversations (id) ON DELETE CASCADE,
                turn INTEGER NOT NULL,
                question TEXT NOT NULL,
                profile TEXT,
                answer TEXT NOT NULL,
                llm_used INTEGER NOT NULL,
                model TEXT,
                citations TEXT NOT NULL,
                created_at TEXT NOT NULL,
                PRIMARY KEY (conversation_id, turn)
            );",
    },
    // Answers of profile operations keyed by file identity (size, mtime, header hash),
    // operation, arguments and aisp version (`aisp_profile::cache`).
    Migration {
        component: "profile_cache",
        version: 1,
        sql: "CREATE TABLE profile_results (
                file_key TEXT NOT NULL,
                op TEXT NOT NULL,
                args TEXT NOT NULL,
                aisp_version TEXT NOT NULL,
                result TEXT NOT NULL,
                created_at TEXT NOT NULL,
                PRIMARY KEY (file_key, op, args, aisp_version)
            );
            CREATE INDEX profile_results_created ON profile_results (created_at);",
    },
    // Profile captures (nsys, ncu, torch.profiler): one row per run, artifacts
    // under $AISP_HOME/runs/<run_id>/ (`aisp_capture::record`).
    Migration {
        component: "captures",
        version: 1,
        sql: "CREATE TABLE captures (
                run_id TEXT PRIMARY KEY,
                kind TEXT NOT NULL CHECK (kind IN ('nsys','ncu','torch')),
                tool TEXT NOT NULL,
                state TEXT NOT NULL CHECK (state IN ('running','succeeded','failed','cancelled','timed_out')),
                command TEXT NOT NULL,
                cwd TEXT,
                run_dir TEXT NOT NULL,
                profiler TEXT,
                profiler_version TEXT,
                exit_code INTEGER,
                created_at TEXT NOT NULL,
                finished_at TEXT,
                duration_ms INTEGER,
                artifacts TEXT,
                findings TEXT,
                error TEXT,
                pid INTEGER NOT NULL
            );
            CREATE INDEX captures_created ON captures (created_at);",
    },
];
