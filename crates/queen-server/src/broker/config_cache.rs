//! Queue configuration cached by name, with a maximum age.
//!
//! A cached entry is used until it is older than the configured age or is
//! invalidated (configure, delete); then it is re-read from PostgreSQL.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::store::QueueRow;

/// Name → queue row, each with the instant it was read.
#[derive(Debug)]
pub struct QueueCache {
    max_age: Duration,
    entries: Mutex<HashMap<String, (QueueRow, Instant)>>,
}

impl QueueCache {
    pub fn new(max_age: Duration) -> Self {
        Self {
            max_age,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Returns the cached row of `name` if it is younger than the maximum age.
    pub fn get(&self, name: &str) -> Option<QueueRow> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(name)
            .filter(|(_, at)| at.elapsed() < self.max_age)
            .map(|(row, _)| row.clone())
    }

    /// Stores a freshly read row.
    pub fn put(&self, row: QueueRow) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.insert(row.name.clone(), (row, Instant::now()));
    }

    /// Forgets `name`, so the next use re-reads it.
    pub fn invalidate(&self, name: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use uuid::Uuid;

    fn row(name: &str) -> QueueRow {
        QueueRow {
            id: Uuid::nil(),
            name: name.into(),
            namespace: String::new(),
            task: String::new(),
            options: Default::default(),
            config_version: 1,
            created_at: Utc::now(),
        }
    }

    #[test]
    fn entries_expire_and_can_be_invalidated() {
        let cache = QueueCache::new(Duration::from_millis(30));
        cache.put(row("q"));
        assert!(cache.get("q").is_some());
        cache.invalidate("q");
        assert!(cache.get("q").is_none());
        cache.put(row("q"));
        std::thread::sleep(Duration::from_millis(40));
        assert!(cache.get("q").is_none());
    }
}
