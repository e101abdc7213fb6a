//! Words for matching questions to tools and concepts: tokenizing with stop
//! words, a light stemmer and a small thesaurus. Tool ranking (the
//! application's `suggest`) and the knowledge base's search share it.

/// Words that carry no meaning for routing.
const STOP: &[&str] = &[
    "a", "an", "the", "and", "or", "of", "to", "in", "on", "for", "with", "is", "are", "my", "me",
    "i", "it", "this", "that", "what", "why", "how", "do", "does", "can", "be", "at", "by", "from",
    "as", "when", "which", "use", "aisp", "please", "show", "get", "give", "want", "need",
    "should", "would", "there", "some", "any", "about", "your", "you", "we", "our", "have", "has",
];

/// The words of `text` as routing and the knowledge base match them: lower
/// case, stop words dropped, lightly stemmed, synonyms mapped to one spelling.
pub fn tokenize(text: &str) -> Vec<String> {
    // Stop words are dropped before stemming too: "this" and "does" would
    // otherwise survive as "thi" and "doe" and match any text with them.
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .map(|w| w.to_ascii_lowercase())
        .filter(|w| w.len() > 1 && !STOP.contains(&w.as_str()))
        .map(|w| normalize(&w))
        .filter(|w| !STOP.contains(&w.as_str()))
        .collect()
}

/// Words that name the same thing in GPU performance work, mapped to one
/// spelling so that a question and a tool meet whichever they use.
const SYNONYMS: &[(&str, &str)] = &[
    ("iteration", "step"),
    ("iter", "step"),
    ("idle", "gap"),
    ("stall", "gap"),
    ("allreduce", "reduce"),
    ("memcpy", "copy"),
    ("transfer", "copy"),
    ("vram", "memory"),
    ("hbm", "memory"),
    ("faster", "fast"),
    ("speedup", "fast"),
    ("quickly", "fast"),
    ("slower", "slow"),
    ("slowest", "slow"),
    ("nsight", "nsys"),
];

/// A light stemmer: plural and common verb endings, so "kernels" meets "kernel".
fn normalize(word: &str) -> String {
    let stemmed = stem(word);
    SYNONYMS
        .iter()
        .find(|(from, _)| *from == stemmed)
        .map(|(_, to)| to.to_string())
        .unwrap_or(stemmed)
}

fn stem(word: &str) -> String {
    for suffix in ["ing", "ies", "es", "s", "ed"] {
        if word.len() >= suffix.len() + 3 && word.ends_with(suffix) {
            let stem = &word[..word.len() - suffix.len()];
            return if suffix == "ies" {
                format!("{stem}y")
            } else {
                stem.to_string()
            };
        }
    }
    word.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_normalized_and_stopwords_dropped() {
        assert_eq!(
            tokenize("Why are my Kernels slow?"),
            vec!["kernel".to_string(), "slow".to_string()]
        );
        assert_eq!(tokenize("batches"), vec!["batch".to_string()]);
    }
}
