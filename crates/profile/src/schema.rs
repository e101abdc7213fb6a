//! Schema introspection. Nsight Systems adds, renames (`_V2`, `_V3` suffixes)
//! and drops tables and columns between versions, so nothing is assumed: every
//! query is built from the tables and columns this export actually has.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::Connection;

use super::error::{ProfileError, Result};

/// One table and its columns, as the export has them.
#[derive(Debug, Clone)]
pub struct TableInfo {
    pub name: String,
    /// Column names in table order (`pragma_table_info` cid order).
    pub columns: Vec<String>,
    /// Root page of the table b-tree (0 for views).
    pub rootpage: u32,
}

impl TableInfo {
    pub fn has(&self, column: &str) -> bool {
        self.columns.iter().any(|c| c.eq_ignore_ascii_case(column))
    }

    /// Position of a column in table order.
    pub fn position(&self, column: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.eq_ignore_ascii_case(column))
    }

    /// The column quoted for SQL when present, else `fallback` (a literal).
    pub fn col_or(&self, column: &str, fallback: &str) -> String {
        if self.has(column) {
            format!("\"{column}\"")
        } else {
            fallback.to_string()
        }
    }

    /// The table name quoted for SQL.
    pub fn quoted(&self) -> String {
        format!("\"{}\"", self.name.replace('"', "\"\""))
    }
}

/// All tables of an export with their columns.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    tables: BTreeMap<String, TableInfo>,
}

impl Schema {
    pub fn load(conn: &Connection, path: &Path) -> Result<Schema> {
        let mut stmt = conn
            .prepare(
                "SELECT m.name, p.name, m.rootpage FROM sqlite_master m, pragma_table_info(m.name) p \
                 WHERE m.type IN ('table','view') ORDER BY m.name, p.cid",
            )
            .map_err(|e| ProfileError::read(path, e))?;
        let mut rows = stmt.query([]).map_err(|e| ProfileError::read(path, e))?;
        let mut tables: BTreeMap<String, TableInfo> = BTreeMap::new();
        while let Some(row) = rows.next().map_err(|e| ProfileError::read(path, e))? {
            let table: String = row.get(0).map_err(|e| ProfileError::read(path, e))?;
            let column: String = row.get(1).map_err(|e| ProfileError::read(path, e))?;
            let rootpage: Option<i64> = row.get(2).map_err(|e| ProfileError::read(path, e))?;
            tables
                .entry(table.clone())
                .or_insert_with(|| TableInfo {
                    name: table,
                    columns: Vec::new(),
                    rootpage: rootpage.unwrap_or(0).clamp(0, u32::MAX as i64) as u32,
                })
                .columns
                .push(column);
        }
        Ok(Schema { tables })
    }

    /// A table by exact name.
    pub fn exact(&self, name: &str) -> Option<&TableInfo> {
        self.tables.get(name)
    }

    /// A table by base name: the exact name or its newest `_V<n>` variant
    /// (`CUPTI_ACTIVITY_KIND_KERNEL`, `CUPTI_ACTIVITY_KIND_KERNEL_V2`, ...).
    pub fn resolve(&self, base: &str) -> Option<&TableInfo> {
        let mut best: Option<(u32, &TableInfo)> = self.tables.get(base).map(|t| (0, t));
        for (name, info) in self.tables.range(base.to_string()..) {
            if !name.starts_with(base) {
                break;
            }
            let rest = &name[base.len()..];
            if let Some(v) = rest.strip_prefix("_V").and_then(|v| v.parse::<u32>().ok())
                && best.is_none_or(|(b, _)| v > b)
            {
                best = Some((v, info));
            }
        }
        best.map(|(_, t)| t)
    }

    /// Every table name, sorted.
    pub fn table_names(&self) -> Vec<String> {
        self.tables.keys().cloned().collect()
    }
}

/// The tables the analyses read, resolved once per export.
#[derive(Debug, Clone, Default)]
pub struct Tables {
    pub kernel: Option<TableInfo>,
    pub runtime: Option<TableInfo>,
    pub memcpy: Option<TableInfo>,
    pub memset: Option<TableInfo>,
    pub sync: Option<TableInfo>,
    pub nvtx: Option<TableInfo>,
    pub osrt: Option<TableInfo>,
    pub string_ids: Option<TableInfo>,
    pub gpu_info: Option<TableInfo>,
    pub cuda_device: Option<TableInfo>,
    pub processes: Option<TableInfo>,
    pub thread_names: Option<TableInfo>,
    pub meta_export: Option<TableInfo>,
    pub meta_capture: Option<TableInfo>,
    pub system_env: Option<TableInfo>,
    pub memcpy_oper_enum: Option<TableInfo>,
    pub mem_kind_enum: Option<TableInfo>,
    pub memory_usage: Option<TableInfo>,
    pub nvtx_domains_in_events: bool,
}

impl Tables {
    pub fn from_schema(schema: &Schema) -> Tables {
        let r = |b: &str| schema.resolve(b).cloned();
        Tables {
            kernel: r("CUPTI_ACTIVITY_KIND_KERNEL"),
            runtime: r("CUPTI_ACTIVITY_KIND_RUNTIME"),
            memcpy: r("CUPTI_ACTIVITY_KIND_MEMCPY"),
            memset: r("CUPTI_ACTIVITY_KIND_MEMSET"),
            sync: r("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"),
            nvtx: r("NVTX_EVENTS"),
            osrt: r("OSRT_API"),
            string_ids: r("StringIds"),
            gpu_info: r("TARGET_INFO_GPU"),
            cuda_device: r("TARGET_INFO_CUDA_DEVICE"),
            processes: r("PROCESSES"),
            thread_names: r("ThreadNames"),
            meta_export: r("META_DATA_EXPORT"),
            meta_capture: r("META_DATA_CAPTURE"),
            system_env: r("TARGET_INFO_SYSTEM_ENV"),
            memcpy_oper_enum: r("ENUM_CUDA_MEMCPY_OPER"),
            mem_kind_enum: r("ENUM_CUDA_MEM_KIND"),
            memory_usage: r("CUDA_GPU_MEMORY_USAGE_EVENTS"),
            nvtx_domains_in_events: schema
                .resolve("NVTX_EVENTS")
                .is_some_and(|t| t.has("domainId")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_prefers_the_newest_versioned_table() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT);
             CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL_V2 (start INT, x INT);
             CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL_V10 (start INT, y INT);
             CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL_OTHER (z INT);
             CREATE TABLE NVTX_EVENTS (start INT, text TEXT);",
        )
        .unwrap();
        let s = Schema::load(&conn, Path::new(":memory:")).unwrap();
        let k = s.resolve("CUPTI_ACTIVITY_KIND_KERNEL").unwrap();
        assert_eq!(k.name, "CUPTI_ACTIVITY_KIND_KERNEL_V10");
        assert!(k.has("Y") && !k.has("x"));
        assert_eq!(k.col_or("y", "NULL"), "\"y\"");
        assert_eq!(k.col_or("textId", "NULL"), "NULL");
        assert!(s.resolve("CUPTI_ACTIVITY_KIND_MEMCPY").is_none());
        assert_eq!(s.resolve("NVTX_EVENTS").unwrap().name, "NVTX_EVENTS");
    }
}
