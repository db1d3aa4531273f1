//! Short text answers to slow questions (which conv implementation won a race, what cuDNN's
//! algorithm search found), remembered on disk so the next start of the process skips the
//! question: a file per key under `<cache dir>/<kind>/`, holding the key and the answer. An
//! answer that can no longer be used is the caller's to detect (it then asks again and
//! overwrites it); a missing, unreadable or foreign file is a miss, never an error.

use crate::cache_dir::{fnv1a, write_atomic, FNV_OFFSET};
use std::path::{Path, PathBuf};

/// The build's version, part of every key: a new build's kernels may answer differently.
const BUILD: &str = env!("CARGO_PKG_VERSION");

fn path(dir: &Path, kind: &str, key: &str) -> PathBuf {
    let h = fnv1a(FNV_OFFSET, key.as_bytes());
    let h2 = fnv1a(h ^ 0x9e37_79b9_7f4a_7c15, key.as_bytes());
    dir.join(kind).join(format!("{h:016x}{h2:016x}.txt"))
}

fn full_key(key: &str) -> String {
    format!("dynaspa {BUILD}|{key}")
}

/// The answer remembered in `dir` for `key` under `kind`, if any.
pub(crate) fn read(dir: &Path, kind: &str, key: &str) -> Option<String> {
    let key = full_key(key);
    let text = std::fs::read_to_string(path(dir, kind, &key)).ok()?;
    let (stored, answer) = text.split_once('\n')?;
    (stored == key).then(|| answer.to_string())
}

/// Remembers `answer` (one line) in `dir` for `key` under `kind`; a cache that cannot be
/// written is noted in the log and otherwise ignored.
pub(crate) fn write(dir: &Path, kind: &str, key: &str, answer: &str) {
    let key = full_key(key);
    let p = path(dir, kind, &key);
    if key.contains('\n') || answer.contains('\n') {
        tracing::debug!(kind, "not remembered on disk: a key or answer of several lines");
        return;
    }
    if let Err(e) = write_atomic(&p, format!("{key}\n{answer}").as_bytes()) {
        tracing::debug!(path = %p.display(), "not remembered on disk: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_comes_back_for_its_key_only_and_is_replaced_by_the_next() {
        let dir = std::env::temp_dir().join(format!("dynaspa-memo-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (kind, key) = ("race", "device x|geometry y");
        assert_eq!(read(&dir, kind, key), None);
        write(&dir, kind, key, "ours");
        assert_eq!(read(&dir, kind, key).as_deref(), Some("ours"));
        assert_eq!(read(&dir, kind, "device x|geometry z"), None);
        assert_eq!(read(&dir, "other", key), None);
        write(&dir, kind, key, "vendor cudnn engine 45");
        assert_eq!(read(&dir, kind, key).as_deref(), Some("vendor cudnn engine 45"));
        // A file holding another key (a hash collision, or a hand-edited file) is a miss.
        std::fs::write(path(&dir, kind, &full_key(key)), "dynaspa 0.0.0|someone else\nours").unwrap();
        assert_eq!(read(&dir, kind, key), None);
        write(&dir, kind, "two\nlines", "ours");
        assert_eq!(read(&dir, kind, "two\nlines"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
