//! Percent-encoding of path segments and query strings.

use std::fmt::Write as _;

/// Encodes `s` for one path segment or query value: everything but the
/// unreserved characters of RFC 3986 is percent-encoded. For the paths of
/// [`crate::Admin::get_json`] and its siblings.
///
/// ```
/// assert_eq!(queen_client::segment("a b/c"), "a%20b%2Fc");
/// ```
pub fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A query string under construction (`?a=1&b=2`).
#[derive(Debug, Default)]
pub(crate) struct Query(String);

impl Query {
    /// Adds `key=value`.
    pub fn push(&mut self, key: &str, value: impl std::fmt::Display) -> &mut Self {
        self.0.push(if self.0.is_empty() { '?' } else { '&' });
        self.0.push_str(key);
        self.0.push('=');
        self.0.push_str(&segment(&value.to_string()));
        self
    }

    /// Adds `key=value` when `value` is set.
    pub fn opt(&mut self, key: &str, value: Option<impl std::fmt::Display>) -> &mut Self {
        if let Some(v) = value {
            self.push(key, v);
        }
        self
    }

    /// The query text, empty or starting with `?`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_escape_reserved_characters() {
        assert_eq!(segment("orders"), "orders");
        assert_eq!(segment("a b/c?d%"), "a%20b%2Fc%3Fd%25");
        assert_eq!(segment("é"), "%C3%A9");
    }

    #[test]
    fn queries_join_pairs() {
        let mut q = Query::default();
        q.push("batch", 10)
            .opt("consumerGroup", Some("g 1"))
            .opt("x", None::<u32>);
        assert_eq!(q.as_str(), "?batch=10&consumerGroup=g%201");
        assert_eq!(Query::default().as_str(), "");
    }
}
