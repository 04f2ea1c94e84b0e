//! TLS to PostgreSQL: `PG_USE_SSL`, `PG_SSL_REJECT_UNAUTHORIZED`,
//! `PG_SSL_ROOT_CERT`. The local server (Debian's default) serves TLS with
//! the "snakeoil" certificate, issued to `localhost`.

use queen_testkit::TestDb;

use crate::common::*;

const SNAKEOIL: &str = "/etc/ssl/certs/ssl-cert-snakeoil.pem";

/// Fails with a clear message when the local server does not offer TLS.
async fn require_server_tls(db: &TestDb) {
    let client = db.client().await.unwrap();
    let ssl: String = client.query_one("SHOW ssl", &[]).await.unwrap().get(0);
    assert_eq!(
        ssl, "on",
        "these tests need TLS on the local PostgreSQL (ssl = on, Debian's default)"
    );
    assert!(
        std::path::Path::new(SNAKEOIL).exists(),
        "{SNAKEOIL} (the server's certificate) is missing"
    );
}

/// How many of the broker's connections to `db` use TLS, and how many do not.
async fn broker_links(db: &TestDb) -> (i64, i64) {
    let client = db.client().await.unwrap();
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE NOT s.ssl)
             FROM pg_stat_activity a JOIN pg_stat_ssl s ON s.pid = a.pid
             WHERE a.datname = $1 AND a.application_name = 'queen-server'",
            &[&db.name],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_use_ssl_encrypts_every_connection_and_plain_stays_plain() {
    let (db, b) = setup_with(&[
        ("PG_USE_SSL", "true"),
        ("PG_SSL_REJECT_UNAUTHORIZED", "false"),
    ])
    .await;
    require_server_tls(&db).await;
    let q = unique("tls");
    push_numbered(&b, &q, "p", "m", 3).await;
    let body = pop_ok(&b, &pop_path(&q, None, "batch=10")).await;
    assert_eq!(txn_ids(&body), vec!["m-0", "m-1", "m-2"]);
    let (tls, plain) = broker_links(&db).await;
    assert!(tls > 0 && plain == 0, "tls {tls}, plain {plain}");

    // without PG_USE_SSL nothing is encrypted, although the server offers it
    let (db, b) = setup().await;
    push_numbered(&b, &q, "p", "m", 1).await;
    let (tls, plain) = broker_links(&db).await;
    assert!(tls == 0 && plain > 0, "tls {tls}, plain {plain}");
}

fn migrate(db: &TestDb, env: &[(&str, &str)]) -> (bool, String) {
    let out = queen_server()
        .arg("migrate")
        .env("PG_PORT", db.port.to_string())
        .env("PG_USER", &db.user)
        .env("PG_DB", &db.name)
        .env("PG_USE_SSL", "true")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_certificate_must_chain_to_a_trusted_root_and_name_the_host() {
    let db = TestDb::empty().await.unwrap();
    require_server_tls(&db).await;
    // the certificate names localhost, not the address
    let (ok, text) = migrate(
        &db,
        &[("PG_HOST", "127.0.0.1"), ("PG_SSL_ROOT_CERT", SNAKEOIL)],
    );
    assert!(!ok, "{text}");
    assert!(text.contains("certificate not valid for name"), "{text}");
    // a CA file that cannot be read stops it, naming the variable
    let (ok, text) = migrate(
        &db,
        &[
            ("PG_HOST", "localhost"),
            ("PG_SSL_ROOT_CERT", "/nonexistent/ca.pem"),
        ],
    );
    assert!(!ok, "{text}");
    assert!(
        text.contains("PG_SSL_ROOT_CERT=/nonexistent/ca.pem"),
        "{text}"
    );
    // the right name and a trusted root: connected
    let (ok, text) = migrate(
        &db,
        &[("PG_HOST", "localhost"), ("PG_SSL_ROOT_CERT", SNAKEOIL)],
    );
    assert!(ok, "{text}");
    assert!(text.contains("migrations applied: "), "{text}");
    // not checking: any certificate, any name
    let (ok, text) = migrate(
        &db,
        &[
            ("PG_HOST", "127.0.0.1"),
            ("PG_SSL_REJECT_UNAUTHORIZED", "false"),
        ],
    );
    assert!(ok, "{text}");
    assert!(text.contains("migrations applied: 0"), "{text}");
}
