//! Small helpers of the formation: signalling a node's process group, the
//! user the printed URI lacks, the tail of a log.

use std::process::Stdio;

use anyhow::{bail, Result};

/// `kill -<sig>` of process group `pgid` (a node's `pg_autoctl` leads it).
pub(super) fn kill_group(pgid: u32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .args([&format!("-{sig}"), "--", &format!("-{pgid}")])
        .stderr(Stdio::null())
        .status();
}

/// `uri` with `user@` in front of its hosts; the URI pg_autoctl prints names
/// no user, and used as printed the broker would connect as the
/// operating-system user.
pub(super) fn with_user(uri: &str, user: &str) -> Result<String> {
    let Some(i) = uri.find("://") else {
        bail!("not a URI: {uri:?}");
    };
    let (scheme, rest) = uri.split_at(i + 3);
    if rest
        .split(['/', '?'])
        .next()
        .is_some_and(|a| a.contains('@'))
    {
        return Ok(uri.to_owned());
    }
    Ok(format!("{scheme}{user}@{rest}"))
}

/// The last lines of a log, for an error message.
pub(super) fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_uri_gets_a_user() {
        let printed = "postgres://127.0.0.1:5001,127.0.0.1:5002/queen?target_session_attrs=read-write&sslmode=prefer";
        assert_eq!(
            with_user(printed, "postgres").unwrap(),
            "postgres://postgres@127.0.0.1:5001,127.0.0.1:5002/queen?target_session_attrs=read-write&sslmode=prefer"
        );
        let named = "postgres://app@h:1/db";
        assert_eq!(with_user(named, "postgres").unwrap(), named);
        assert!(with_user("host=h", "postgres").is_err());
    }
}
