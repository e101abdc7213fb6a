//! Conversations of `aisp_ask`, kept in the store so a follow-up question
//! (`conversation_id`) sees the earlier turns and reuses their profile.

use rusqlite::{OptionalExtension, params};

use aisp_store::{Store, StoreError};

use super::agent::Turn;

/// One stored turn.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTurn {
    pub turn: i64,
    pub question: String,
    pub profile: Option<String>,
    pub answer: String,
    pub llm_used: bool,
    pub model: Option<String>,
}

impl StoredTurn {
    pub fn as_turn(&self) -> Turn {
        Turn {
            question: self.question.clone(),
            answer: self.answer.clone(),
        }
    }
}

/// A fresh conversation id (`conv_` + 16 hex digits).
pub fn new_id() -> String {
    aisp_base::new_id("conv")
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Whether a conversation exists.
pub fn exists(store: &Store, id: &str) -> Result<bool, StoreError> {
    let conn = store.conn();
    conn.query_row(
        "SELECT 1 FROM ai_conversations WHERE id = ?1",
        params![id],
        |_| Ok(()),
    )
    .optional()
    .map(|r| r.is_some())
    .map_err(|e| store.err(e))
}

/// The last `limit` turns, oldest first.
pub fn history(store: &Store, id: &str, limit: usize) -> Result<Vec<StoredTurn>, StoreError> {
    let conn = store.conn();
    let mut stmt = conn
        .prepare(
            "SELECT turn, question, profile, answer, llm_used, model FROM ai_turns
             WHERE conversation_id = ?1 ORDER BY turn DESC LIMIT ?2",
        )
        .map_err(|e| store.err(e))?;
    let rows = stmt
        .query_map(params![id, limit as i64], |r| {
            Ok(StoredTurn {
                turn: r.get(0)?,
                question: r.get(1)?,
                profile: r.get(2)?,
                answer: r.get(3)?,
                llm_used: r.get::<_, i64>(4)? != 0,
                model: r.get(5)?,
            })
        })
        .map_err(|e| store.err(e))?;
    let mut turns: Vec<StoredTurn> = rows.collect::<Result<_, _>>().map_err(|e| store.err(e))?;
    turns.reverse();
    Ok(turns)
}

/// What to store for one answered question.
#[derive(Debug, Clone)]
pub struct NewTurn<'a> {
    pub question: &'a str,
    pub profile: Option<&'a str>,
    pub answer: &'a str,
    pub llm_used: bool,
    pub model: Option<&'a str>,
    /// The citations as JSON (kept for later inspection).
    pub citations_json: &'a str,
}

/// Append a turn, creating the conversation on its first turn. Returns the turn number.
pub fn append(store: &Store, id: &str, t: &NewTurn<'_>) -> Result<i64, StoreError> {
    let mut conn = store.conn();
    let tx = conn.transaction().map_err(|e| store.err(e))?;
    let ts = now();
    tx.execute(
        "INSERT INTO ai_conversations (id, created_at, updated_at) VALUES (?1, ?2, ?2)
         ON CONFLICT(id) DO UPDATE SET updated_at = excluded.updated_at",
        params![id, ts],
    )
    .map_err(|e| store.err(e))?;
    let turn: i64 = tx
        .query_row(
            "SELECT COALESCE(MAX(turn), 0) + 1 FROM ai_turns WHERE conversation_id = ?1",
            params![id],
            |r| r.get(0),
        )
        .map_err(|e| store.err(e))?;
    tx.execute(
        "INSERT INTO ai_turns (conversation_id, turn, question, profile, answer, llm_used, model, citations, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            id,
            turn,
            t.question,
            t.profile,
            t.answer,
            t.llm_used as i64,
            t.model,
            t.citations_json,
            ts
        ],
    )
    .map_err(|e| store.err(e))?;
    tx.commit().map_err(|e| store.err(e))?;
    Ok(turn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_are_appended_and_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.sqlite")).unwrap();
        let id = new_id();
        assert!(id.starts_with("conv_") && id.len() == 21);
        assert!(!exists(&store, &id).unwrap());
        for i in 1..=3 {
            let q = format!("q{i}");
            let a = format!("a{i}");
            let n = append(
                &store,
                &id,
                &NewTurn {
                    question: &q,
                    profile: (i == 1).then_some("p.sqlite"),
                    answer: &a,
                    llm_used: false,
                    model: None,
                    citations_json: "[]",
                },
            )
            .unwrap();
            assert_eq!(n, i);
        }
        assert!(exists(&store, &id).unwrap());
        let h = history(&store, &id, 2).unwrap();
        assert_eq!(h.iter().map(|t| t.turn).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(h[1].answer, "a3");
        let all = history(&store, &id, 10).unwrap();
        assert_eq!(all[0].profile.as_deref(), Some("p.sqlite"));
    }
}
