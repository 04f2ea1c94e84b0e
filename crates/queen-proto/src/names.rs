//! Validated names: parsed once at the edge, trusted afterwards.

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
    Ok(())
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// Validates `s` (non-empty, at most 255 characters, no control characters).
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
