//! `queen config`: contexts in the configuration file, their precedence
//! under flags and the environment, and the file's mode.

use std::os::unix::fs::PermissionsExt as _;

use serde_json::json;

use crate::common::*;
use crate::failures::{token, SECRET};

async fn cli(env: &[(&str, &str)], args: &[&str]) -> Run {
    queen_raw(args, None, env).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contexts_are_set_used_and_lose_to_flags_and_environment() {
    let (_db, b) = fresh_broker(&[("JWT_ENABLED", "true"), ("JWT_SECRET", SECRET)])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("queen").join("config.yaml");
    let cfg_text = cfg.to_str().unwrap().to_owned();
    let env = [("QUEEN_CONFIG", cfg_text.as_str())];
    let live = b.url("");
    let dead = format!("http://127.0.0.1:{}", queen_testkit::free_port().unwrap());
    let writer = token("read-write");
    let r = cli(
        &env,
        &[
            "config",
            "set-context",
            "live",
            "--url",
            &live,
            "--token",
            &writer,
            "--queue",
            "orders",
        ],
    )
    .await;
    assert!(r.ok().starts_with("context live created"), "{r:?}");
    // the file holds a token: owner only, and its directory too
    let mode = std::fs::metadata(&cfg).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = std::fs::metadata(cfg.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);
    cli(&env, &["config", "set-context", "dead", "--url", &dead])
        .await
        .ok();
    assert!(cli(&env, &["config", "current-context"])
        .await
        .fails(USER)
        .contains("no current context"));
    assert!(cli(&env, &["config", "use-context", "nope"])
        .await
        .fails(USER)
        .contains("nope"));
    cli(&env, &["config", "use-context", "live"]).await.ok();
    assert_eq!(
        cli(&env, &["config", "current-context"]).await.ok().trim(),
        "live"
    );

    // URL, token and default queue come from the current context
    cli(&env, &["push", "orders", "1"]).await.ok();
    let popped = cli(&env, &["pop", "-o", "json"]).await.json();
    assert_eq!(popped[0]["data"], json!(1), "{popped}");
    assert_eq!(popped[0]["queue"], "orders");
    // another context for one command
    assert_eq!(
        cli(&env, &["--context", "dead", "queues"]).await.code,
        UNREACHABLE
    );
    // a flag wins over the context: a bad token is refused
    assert_eq!(
        cli(&env, &["--token", "garbage", "queues"]).await.code,
        AUTH
    );

    // the environment wins over the context, the flag over the environment
    cli(&env, &["config", "use-context", "dead"]).await.ok();
    assert_eq!(cli(&env, &["queues"]).await.code, UNREACHABLE);
    cli(
        &[env[0], ("QUEEN_URL", &live), ("QUEEN_TOKEN", &writer)],
        &["queues"],
    )
    .await
    .ok();
    cli(
        &[env[0], ("QUEEN_URL", &dead), ("QUEEN_TOKEN", &writer)],
        &["--url", &live, "queues"],
    )
    .await
    .ok();
    // QUEEN_QUEUE wins over the context's queue, the argument over both
    cli(&env, &["config", "use-context", "live"]).await.ok();
    cli(&env, &["push", "other", "2"]).await.ok();
    let r = cli(&[env[0], ("QUEEN_QUEUE", "other")], &["pop", "-o", "json"]).await;
    assert_eq!(r.json()[0]["queue"], "other");
    cli(&env, &["push", "third", "3"]).await.ok();
    let r = cli(
        &[env[0], ("QUEEN_QUEUE", "other")],
        &["pop", "third", "-o", "json"],
    )
    .await;
    assert_eq!(r.json()[0]["queue"], "third");

    // listings never show the token
    let list = cli(&env, &["config", "get-contexts", "-o", "json"]).await;
    assert!(!list.stdout.contains(&writer), "{list:?}");
    let list = list.json();
    assert_eq!(list[0]["name"], "dead");
    assert_eq!(
        list[1],
        json!({"name": "live", "current": true, "url": live, "queue": "orders", "token": "set"})
    );
    let table = cli(&env, &["config", "get-contexts"]).await;
    assert!(
        table
            .ok()
            .lines()
            .any(|l| l.starts_with("*") && l.contains("live")),
        "{table:?}"
    );
    // set-context changes only what is given
    cli(
        &env,
        &["config", "set-context", "live", "--queue", "invoices"],
    )
    .await
    .ok();
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(
        text.contains("invoices") && text.contains(&writer),
        "{text}"
    );
    cli(&env, &["config", "delete-context", "live"]).await.ok();
    assert_eq!(cli(&env, &["config", "current-context"]).await.code, USER);
    assert_eq!(
        cli(&env, &["config", "delete-context", "live"]).await.code,
        USER
    );
    // a file with an unknown key is refused, naming it
    std::fs::write(&cfg, "contexts:\n  a:\n    ulr: x\n").unwrap();
    assert!(cli(&env, &["queues"]).await.fails(USER).contains("ulr"));
}
