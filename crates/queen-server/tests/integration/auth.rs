//! JWT bearer authentication (http-api.md §1.7).

use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

const SECRET: &str = "test-signing-secret";
/// An Ed25519 key pair made for these tests only.
const ED_PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIN0jOm+kyHpsmBbejjNwt38Tm9a1VCNRuRVOE4AzR4tb
-----END PRIVATE KEY-----
";
const ED_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEACOsgoEj+l99aMU/hnetVESG94CMKZgxBKSeAiJ+19p4=
-----END PUBLIC KEY-----
";

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn hs256(claims: Value) -> String {
    encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(SECRET.as_bytes()).unwrap(),
    )
    .unwrap()
}

async fn call(
    b: &queen_testkit::TestBroker,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = b.http.request(method, b.url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let bytes = resp.bytes().await.unwrap();
    (
        status,
        if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap()
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_gate_the_routes_and_push_stamps_the_subject() {
    let (_db, b) = setup_with(&[
        ("JWT_ENABLED", "true"),
        ("JWT_SECRET", SECRET),
        ("JWT_ISSUER", "queen-tests"),
    ])
    .await;
    let exp = now() + 600;
    let reader = hs256(json!({"sub": "r", "role": "read-only", "iss": "queen-tests", "exp": exp}));
    let writer = hs256(
        json!({"sub": "svc-orders", "roles": ["read-write"], "iss": "queen-tests", "exp": exp}),
    );
    let admin = hs256(json!({"sub": "ops", "role": "admin", "iss": "queen-tests", "exp": exp}));
    let q = unique("auth");
    let push_body = json!({"items": [{"queue": q, "payload": {"a": 1}, "producerSub": "forged"}]});

    // public routes need nothing
    let (status, _) = call(&b, reqwest::Method::GET, "/health", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = call(
        &b,
        reqwest::Method::POST,
        "/api/v1/push",
        None,
        Some(push_body.clone()),
    )
    .await;
    assert_eq!(
        assert_error(status, &body, StatusCode::UNAUTHORIZED),
        "Authentication required"
    );
    let (status, body) = call(
        &b,
        reqwest::Method::POST,
        "/api/v1/push",
        Some("not-a-jwt"),
        Some(push_body.clone()),
    )
    .await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED);
    let expired =
        hs256(json!({"sub": "x", "role": "admin", "iss": "queen-tests", "exp": now() - 3600}));
    let (status, body) = call(
        &b,
        reqwest::Method::GET,
        "/api/v1/resources/queues",
        Some(&expired),
        None,
    )
    .await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED);
    let foreign = hs256(json!({"sub": "x", "role": "admin", "iss": "someone-else", "exp": exp}));
    let (status, body) = call(
        &b,
        reqwest::Method::GET,
        "/api/v1/resources/queues",
        Some(&foreign),
        None,
    )
    .await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED);
    let other_key = encode(
        &Header::new(Algorithm::HS256),
        &json!({"role": "admin", "iss": "queen-tests", "exp": exp}),
        &EncodingKey::from_secret(b"other").unwrap(),
    )
    .unwrap();
    let (status, body) = call(
        &b,
        reqwest::Method::GET,
        "/api/v1/resources/queues",
        Some(&other_key),
        None,
    )
    .await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED);

    // read-only reads, but cannot write
    let (status, _) = call(
        &b,
        reqwest::Method::GET,
        "/api/v1/resources/queues",
        Some(&reader),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = call(
        &b,
        reqwest::Method::POST,
        "/api/v1/push",
        Some(&reader),
        Some(push_body.clone()),
    )
    .await;
    assert_eq!(
        assert_error(status, &body, StatusCode::FORBIDDEN),
        "Insufficient permissions"
    );

    // read-write pushes and pops; the message carries the token's subject
    let (status, body) = call(
        &b,
        reqwest::Method::POST,
        "/api/v1/push",
        Some(&writer),
        Some(push_body),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = call(
        &b,
        reqwest::Method::GET,
        &pop_path(&q, None, ""),
        Some(&writer),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["messages"][0]["producerSub"], "svc-orders");
    let (status, body) = call(
        &b,
        reqwest::Method::DELETE,
        &format!("/api/v1/resources/queues/{q}"),
        Some(&writer),
        None,
    )
    .await;
    assert_error(status, &body, StatusCode::FORBIDDEN);
    let (status, body) = call(
        &b,
        reqwest::Method::GET,
        "/api/v1/system/maintenance",
        Some(&writer),
        None,
    )
    .await;
    assert_error(status, &body, StatusCode::FORBIDDEN);

    // admin can do everything
    let (status, body) = call(
        &b,
        reqwest::Method::DELETE,
        &format!("/api/v1/resources/queues/{q}"),
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = call(
        &b,
        reqwest::Method::GET,
        "/api/v1/system/maintenance",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // preflight stays open for browsers
    let (status, _) = call(&b, reqwest::Method::OPTIONS, "/api/v1/push", None, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eddsa_tokens_verify_with_the_public_key() {
    let (_db, b) = setup_with(&[
        ("JWT_ENABLED", "true"),
        ("JWT_ALGORITHM", "EdDSA"),
        ("JWT_PUBLIC_KEY", ED_PUBLIC),
    ])
    .await;
    let key = EncodingKey::from_ed_pem(ED_PRIVATE.as_bytes()).unwrap();
    let token = encode(
        &Header::new(Algorithm::EdDSA),
        &json!({"sub": "e", "role": "read-only", "exp": now() + 600}),
        &key,
    )
    .unwrap();
    let (status, _) = call(
        &b,
        reqwest::Method::GET,
        "/api/v1/resources/overview",
        Some(&token),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // an HS256 token is refused when EdDSA is configured
    let hs = hs256(json!({"sub": "e", "role": "admin", "exp": now() + 600}));
    let (status, body) = call(
        &b,
        reqwest::Method::GET,
        "/api/v1/resources/overview",
        Some(&hs),
        None,
    )
    .await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_auth_producer_sub_is_always_null() {
    let (_db, b) = setup().await;
    let q = unique("noauth");
    push_items(
        &b,
        json!([{"queue": q, "payload": 1, "producerSub": "forged"}]),
    )
    .await;
    let body = pop_ok(&b, &pop_path(&q, None, "")).await;
    assert_eq!(body["messages"][0]["producerSub"], Value::Null);
}
