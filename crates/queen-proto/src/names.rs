//! Validated names: parsed once at the edge, trusted afterwards.
//!
//! This module is the one place that decides which names and keys a client
//! may create, and how they travel in a URL path: percent-encoded, a name as
//! one segment (`/` spelled `%2F`), a timer key as the rest of the path (its
//! `/` kept literal). Every HTTP client (and proxy) rewrites some paths before
//! they reach the broker: it removes `.` and `..` segments (also spelled
//! `%2e`), and proxies merge empty segments (`//`) and drop or add a final
//! `/`. A name or key with such a segment would reach another resource, or
//! none, once sent: [`path_problem`] refuses it wherever it is created or
//! named, with the same rule for every kind of name (docs/http-api.md, "Names").

use std::fmt;

/// The consumer group used when a request names none (queue mode).
pub const QUEUE_MODE: &str = "__QUEUE_MODE__";

/// The partition a push lands in when it names none.
pub const DEFAULT_PARTITION: &str = "Default";

/// Longest accepted queue, partition or group name, in characters.
pub const MAX_NAME_CHARS: usize = 255;

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    #[error("{0} must not be empty")]
    Empty(&'static str),
    #[error("{0} must be at most 255 characters")]
    TooLong(&'static str),
    #[error("{0} must not contain control characters")]
    Control(&'static str),
    /// A `.` or `..` segment between `/` (or a backslash), or an empty one.
    #[error("{0} {1}")]
    Path(&'static str, PathProblem),
}

/// Why a name or key cannot travel in a URL path and arrive as itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathProblem {
    /// `.` or `..` (in any spelling, `%2e` included) as the whole name or as a
    /// segment between `/`: HTTP clients remove such segments from a path.
    #[error("must not be `.` or `..` or have such a segment between `/` (HTTP clients remove them from a URL path)")]
    DotSegment,
    /// An empty segment: a leading or trailing `/`, or `//` (proxies merge or drop them).
    #[error("must not start or end with `/` or contain `//` (proxies rewrite them in a URL path)")]
    EmptySegment,
}

/// Whether a path segment is `.` or `..` once percent-decoded (`%2e`, `%2E`).
fn is_dot_segment(segment: &str) -> bool {
    let mut rest = segment.as_bytes();
    let mut dots = 0;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix(b".") {
            rest = r;
        } else if rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(b"%2e") {
            rest = &rest[3..];
        } else {
            return false;
        }
        dots += 1;
    }
    (1..=2).contains(&dots)
}

/// Why `s` (a name, a key) would not survive the trip through a URL path, if
/// it would not: a `.` or `..` segment, or an empty segment. Segments are
/// split at `/` and at a backslash (which browsers' URL parsers read as `/`). The
/// empty string is not judged here (every kind of name refuses it on its own).
pub fn path_problem(s: &str) -> Option<PathProblem> {
    if s.is_empty() {
        return None;
    }
    let mut empty = false;
    for segment in s.split(['/', '\\']) {
        if is_dot_segment(segment) {
            return Some(PathProblem::DotSegment);
        }
        empty |= segment.is_empty();
    }
    empty.then_some(PathProblem::EmptySegment)
}

/// Whether a transactionId has a `.` or `..` segment: the routes that name
/// a message by it in their path (retry, dead-letter deletion) could not
/// reach it. Empty segments are allowed: `/` travels percent-encoded.
pub fn transaction_id_has_dot_segment(t: &str) -> bool {
    path_problem(t) == Some(PathProblem::DotSegment)
}

/// [`path_problem`] as the error of a name of `kind`.
pub fn check_path(kind: &'static str, s: &str) -> Result<(), NameError> {
    match path_problem(s) {
        Some(p) => Err(NameError::Path(kind, p)),
        None => Ok(()),
    }
}

fn check(kind: &'static str, s: &str) -> Result<(), NameError> {
    if s.is_empty() {
        return Err(NameError::Empty(kind));
    }
    if s.chars().count() > MAX_NAME_CHARS {
        return Err(NameError::TooLong(kind));
    }
    if s.chars().any(char::is_control) {
        return Err(NameError::Control(kind));
    }
    check_path(kind, s)
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// Validates `s` (non-empty, at most 255 characters, no control
            /// characters, no segment a URL path would rewrite: [`path_problem`]).
            pub fn new(s: impl Into<String>) -> Result<Self, NameError> {
                let s = s.into();
                check($kind, &s)?;
                Ok(Self(s))
            }

            /// Returns the name as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

name_type!(
    /// A queue name.
    QueueName,
    "queue"
);
name_type!(
    /// A partition name inside a queue.
    PartitionName,
    "partition"
);
name_type!(
    /// A consumer group name; `__QUEUE_MODE__` stands for queue mode.
    ConsumerGroup,
    "consumerGroup"
);

impl PartitionName {
    /// The `Default` partition.
    pub fn default_partition() -> Self {
        Self(DEFAULT_PARTITION.to_owned())
    }
}

impl ConsumerGroup {
    /// Queue mode: the group every consumer shares when it names none.
    pub fn queue_mode() -> Self {
        Self(QUEUE_MODE.to_owned())
    }

    /// Parses an optional group where absent, `null` and empty all mean queue mode.
    pub fn from_optional(s: Option<&str>) -> Result<Self, NameError> {
        match s {
            None | Some("") => Ok(Self::queue_mode()),
            Some(s) => Self::new(s),
        }
    }
}

impl QueueName {
    /// Namespace and task derived from a queue name on auto-create:
    /// `billing.invoice` gives (`billing`, `invoice`), `orders` gives (`orders`, ``).
    pub fn derived_namespace_task(&self) -> (String, String) {
        let mut parts = self.0.split('.');
        let namespace = parts.next().unwrap_or_default().to_owned();
        let task = parts.next().unwrap_or_default().to_owned();
        (namespace, task)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated() {
        assert!(QueueName::new("orders").is_ok());
        assert_eq!(QueueName::new(""), Err(NameError::Empty("queue")));
        assert_eq!(
            QueueName::new("x".repeat(256)),
            Err(NameError::TooLong("queue"))
        );
        assert!(QueueName::new("é".repeat(255)).is_ok());
        assert_eq!(
            PartitionName::new("a\nb"),
            Err(NameError::Control("partition"))
        );
    }

    #[test]
    fn names_that_a_url_path_rewrites_are_refused() {
        for bad in [
            ".", "..", "%2e", "%2E%2e", ".%2E", "a/./b", "a/../b", "../x", "x/..", "a\\..\\b",
        ] {
            assert_eq!(path_problem(bad), Some(PathProblem::DotSegment), "{bad}");
        }
        for bad in ["/x", "x/", "a//b", "/", "a\\"] {
            assert_eq!(path_problem(bad), Some(PathProblem::EmptySegment), "{bad}");
        }
        for fine in [
            "...",
            "a.b",
            ".hidden",
            "x..",
            "%2e%2e%2e",
            "a/b",
            "%2F",
            "a%2fb",
            "é/ü",
        ] {
            assert_eq!(path_problem(fine), None, "{fine}");
        }
        assert_eq!(
            QueueName::new(".."),
            Err(NameError::Path("queue", PathProblem::DotSegment))
        );
        assert_eq!(
            ConsumerGroup::new("g/"),
            Err(NameError::Path("consumerGroup", PathProblem::EmptySegment))
        );
        assert!(PartitionName::new("p/./q")
            .unwrap_err()
            .to_string()
            .starts_with("partition must not be `.` or `..`"));
        assert!(QueueName::new("billing.invoice").is_ok());
    }

    #[test]
    fn empty_group_means_queue_mode() {
        assert_eq!(
            ConsumerGroup::from_optional(None).unwrap().as_str(),
            QUEUE_MODE
        );
        assert_eq!(
            ConsumerGroup::from_optional(Some("")).unwrap().as_str(),
            QUEUE_MODE
        );
        assert_eq!(
            ConsumerGroup::from_optional(Some("g")).unwrap().as_str(),
            "g"
        );
    }

    #[test]
    fn namespace_and_task_come_from_dots() {
        let q = QueueName::new("billing.invoice.v2").unwrap();
        assert_eq!(
            q.derived_namespace_task(),
            ("billing".into(), "invoice".into())
        );
        let q = QueueName::new("orders").unwrap();
        assert_eq!(q.derived_namespace_task(), ("orders".into(), String::new()));
    }
}
