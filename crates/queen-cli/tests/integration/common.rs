//! Running the built `queen` binary against a test broker.

use std::process::Stdio;

use queen_testkit::TestBroker;
use serde_json::Value;
use tokio::io::AsyncWriteExt as _;

/// Exit status of a user error: bad usage or input, a 4xx.
pub const USER: i32 = 1;
/// Exit status when no broker answers, or one answers 5xx.
pub const UNREACHABLE: i32 = 2;
/// Exit status of a refused token (401, 403).
pub const AUTH: i32 = 3;
/// Exit status of a pop or look-up that found nothing.
pub const EMPTY: i32 = 4;

/// What one run of `queen` did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Asserts status 0 and returns standard output.
    #[track_caller]
    pub fn ok(&self) -> &str {
        assert_eq!(self.code, 0, "{self:?}");
        &self.stdout
    }

    /// Asserts status 0 and parses standard output as JSON.
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(self.ok()).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }

    /// Asserts `code` and a single-line error message, and returns it.
    #[track_caller]
    pub fn fails(&self, code: i32) -> &str {
        assert_eq!(self.code, code, "{self:?}");
        let err = self.stderr.trim_end();
        assert!(!err.is_empty(), "no message: {self:?}");
        assert_eq!(err.lines().count(), 1, "more than one line: {self:?}");
        err
    }
}

pub use queen_testkit::fresh_broker;

/// Runs `queen --url <broker> args…`.
pub async fn queen(b: &TestBroker, args: &[&str]) -> Run {
    queen_at(&b.url(""), args, None, &[]).await
}

/// Runs `queen --url <url> args…` with `stdin` and extra environment.
pub async fn queen_at(url: &str, args: &[&str], stdin: Option<&[u8]>, env: &[(&str, &str)]) -> Run {
    let mut all = vec!["--url", url];
    all.extend_from_slice(args);
    queen_raw(&all, stdin, env).await
}

/// Runs `queen args…` (no `--url`) with `stdin` and extra environment.
pub async fn queen_raw(args: &[&str], stdin: Option<&[u8]>, env: &[(&str, &str)]) -> Run {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_queen"));
    cmd.args(args);
    // no setting of the machine leaks in: no context file unless a test names one
    cmd.env_remove("QUEEN_URL")
        .env_remove("QUEEN_TOKEN")
        .env_remove("QUEEN_CONTEXT")
        .env_remove("QUEEN_QUEUE")
        .env("QUEEN_CONFIG", "/nonexistent/queen-cli-tests/config.yaml");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(input).await.unwrap();
        drop(pipe);
    }
    let out = child.wait_with_output().await.unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A queue (or group) name no other test uses.
pub fn unique(prefix: &str) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}-{}", &id[..12])
}

/// Messages stored in `queue` (0 when the queue does not exist).
pub async fn stored(b: &TestBroker, queue: &str) -> u64 {
    let (status, v) = b.get(&format!("/api/v1/resources/queues/{queue}")).await;
    if status == 404 {
        return 0;
    }
    v["totals"]["total"].as_u64().unwrap()
}
