//! Where values come from ([`EnvSource`]) and the typed readers every concern
//! uses: each error names its variable, and every name asked for is recorded
//! so a test can check the documentation lists them all.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

/// Where configuration values come from.
pub trait EnvSource {
    /// Returns the value of `name`, if set.
    fn get(&self, name: &str) -> Option<String>;
}

/// The process environment.
#[derive(Debug, Default)]
pub struct ProcessEnv;

impl EnvSource for ProcessEnv {
    fn get(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

impl EnvSource for HashMap<String, String> {
    fn get(&self, name: &str) -> Option<String> {
        HashMap::get(self, name).cloned()
    }
}

/// A bad configuration value; the message names the variable.
#[derive(Debug, thiserror::Error)]
#[error("invalid {var}={value:?}: {reason}")]
pub struct ConfigError {
    pub var: &'static str,
    pub value: String,
    pub reason: String,
}

impl ConfigError {
    pub(super) fn new(
        var: &'static str,
        value: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            var,
            value: value.into(),
            reason: reason.into(),
        }
    }
}

/// Reads variables from an [`EnvSource`], recording every name it is asked for.
pub(super) struct Reader<'a> {
    env: &'a dyn EnvSource,
    asked: Mutex<Vec<&'static str>>,
}

impl<'a> Reader<'a> {
    pub(super) fn new(env: &'a dyn EnvSource) -> Self {
        Self {
            env,
            asked: Mutex::new(Vec::new()),
        }
    }

    /// Every name asked for so far, sorted, without repeats.
    pub(super) fn into_asked(self) -> Vec<&'static str> {
        let mut names = self.asked.into_inner().unwrap_or_default();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// The value of `var`; unset and blank are the same.
    pub(super) fn raw(&self, var: &'static str) -> Option<String> {
        if let Ok(mut asked) = self.asked.lock() {
            asked.push(var);
        }
        self.env.get(var).filter(|v| !v.trim().is_empty())
    }

    /// Reads `var`, falling back to its alias; returns the name that was set.
    pub(super) fn raw_aliased(
        &self,
        var: &'static str,
        alias: &'static str,
    ) -> Option<(&'static str, String)> {
        self.raw(var)
            .map(|v| (var, v))
            .or_else(|| self.raw(alias).map(|v| (alias, v)))
    }

    /// Parses `var`, or returns `default` when it is unset.
    pub(super) fn parsed<T: FromStr>(&self, var: &'static str, default: T) -> Result<T, ConfigError>
    where
        T::Err: fmt::Display,
    {
        Ok(self.optional(var)?.unwrap_or(default))
    }

    /// Parses `var` when it is set.
    pub(super) fn optional<T: FromStr>(&self, var: &'static str) -> Result<Option<T>, ConfigError>
    where
        T::Err: fmt::Display,
    {
        self.raw(var)
            .map(|v| {
                v.trim()
                    .parse()
                    .map_err(|e: T::Err| ConfigError::new(var, v.clone(), e.to_string()))
            })
            .transpose()
    }

    /// The value of `var`, or `default` when it is unset.
    pub(super) fn string(&self, var: &'static str, default: &str) -> String {
        self.raw(var).unwrap_or_else(|| default.to_owned())
    }

    /// Booleans are true only for the literal `true` (and `1`); anything else that is set
    /// must be `false` or `0`.
    pub(super) fn boolean(&self, var: &'static str, default: bool) -> Result<bool, ConfigError> {
        match self.raw(var).as_deref().map(str::trim) {
            None => Ok(default),
            Some("true" | "1") => Ok(true),
            Some("false" | "0") => Ok(false),
            Some(v) => Err(ConfigError::new(var, v, "expected true or false")),
        }
    }

    /// A duration given in milliseconds.
    pub(super) fn millis(
        &self,
        var: &'static str,
        default_ms: u64,
    ) -> Result<Duration, ConfigError> {
        Ok(Duration::from_millis(self.parsed(var, default_ms)?))
    }
}

/// Refuses 0 for a count or size that must be at least 1.
pub(super) fn at_least_one<T: PartialEq + Default>(
    var: &'static str,
    v: T,
) -> Result<T, ConfigError> {
    if v == T::default() {
        Err(ConfigError::new(var, "0", "must be at least 1"))
    } else {
        Ok(v)
    }
}
