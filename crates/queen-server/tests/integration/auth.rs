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

/// A second Ed25519 key pair, for key rotation through JWKS.
const ED2_PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIDI+CkBw8zDLoh0uR32CBcSp9bG5T5Mr8YCMzy1FSR7y
-----END PRIVATE KEY-----
";
const ED2_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEAyu6aU9o5UMDjgi5VfE6XO2o5ZC2PAmhKGb71ZF3jQKU=
-----END PUBLIC KEY-----
";

/// The JWK of an Ed25519 public key in PEM form (its last 32 bytes are the key).
fn ed_jwk(public_pem: &str, kid: &str) -> Value {
    use base64::Engine;
    let body: String = public_pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap();
    let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&der[der.len() - 32..]);
    json!({"kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "alg": "EdDSA", "use": "sig"})
}

fn eddsa(private_pem: &str, kid: &str) -> String {
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid.to_owned());
    encode(
        &header,
        &json!({"sub": kid, "role": "read-only", "exp": now() + 600}),
        &EncodingKey::from_ed_pem(private_pem.as_bytes()).unwrap(),
    )
    .unwrap()
}

/// A JWKS endpoint whose answer the test changes: (HTTP status, body).
async fn jwks_server(
    state: std::sync::Arc<std::sync::Mutex<(u16, Value)>>,
) -> std::net::SocketAddr {
    use axum::response::IntoResponse;
    let app = axum::Router::new().route(
        "/jwks",
        axum::routing::get(move || {
            let state = state.clone();
            async move {
                let (code, body) = state.lock().unwrap().clone();
                (
                    axum::http::StatusCode::from_u16(code).unwrap(),
                    axum::Json(body),
                )
                    .into_response()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwks_keys_verify_tokens_by_kid_and_follow_rotation() {
    let state = std::sync::Arc::new(std::sync::Mutex::new((503u16, json!({}))));
    let addr = jwks_server(state.clone()).await;
    let url = format!("http://{addr}/jwks");
    let (_db, b) = setup_with(&[
        ("JWT_ENABLED", "true"),
        ("JWT_ALGORITHM", "auto"),
        ("JWT_SECRET", SECRET),
        ("JWT_JWKS_URL", &url),
        ("JWT_JWKS_MIN_REFETCH_MS", "200"),
    ])
    .await;
    let get = |token: String| {
        let b = &b;
        async move {
            call(
                b,
                reqwest::Method::GET,
                "/api/v1/resources/overview",
                Some(&token),
                None,
            )
            .await
        }
    };
    let refetch_window = std::time::Duration::from_millis(300);

    // the endpoint is down: tokens that need it are refused, others still pass
    let (status, body) = get(eddsa(ED_PRIVATE, "a")).await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED);
    let hs = hs256(json!({"sub": "h", "role": "read-only", "exp": now() + 600}));
    assert_eq!(get(hs.clone()).await.0, StatusCode::OK);

    // it comes back: an unknown kid fetches the set again
    *state.lock().unwrap() = (200, json!({"keys": [ed_jwk(ED_PUBLIC, "a")]}));
    tokio::time::sleep(refetch_window).await;
    assert_eq!(get(eddsa(ED_PRIVATE, "a")).await.0, StatusCode::OK);

    // a new key appears under a new kid (rotation)
    let (status, body) = get(eddsa(ED2_PRIVATE, "b")).await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED);
    *state.lock().unwrap() = (
        200,
        json!({"keys": [ed_jwk(ED_PUBLIC, "a"), ed_jwk(ED2_PUBLIC, "b")]}),
    );
    tokio::time::sleep(refetch_window).await;
    assert_eq!(get(eddsa(ED2_PRIVATE, "b")).await.0, StatusCode::OK);

    // a kid names the key: another key's signature under it is refused
    let (status, body) = get(eddsa(ED2_PRIVATE, "a")).await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED);
    // an endpoint that fails later keeps the keys already known
    *state.lock().unwrap() = (500, json!({}));
    tokio::time::sleep(refetch_window).await;
    let (status, _) = get(eddsa(ED_PRIVATE, "c")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(get(eddsa(ED_PRIVATE, "a")).await.0, StatusCode::OK);
    assert_eq!(get(hs).await.0, StatusCode::OK);
}

/// The whole text of a pop answer, byte for byte: key order, escapes, a
/// trace id and a missing one (`null`), the producer's subject, the stored
/// payload text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pop_answer_is_exactly_this_text() {
    let (_db, b) = setup_with(&[
        ("JWT_ENABLED", "true"),
        ("JWT_SECRET", SECRET),
        ("JWT_ISSUER", "queen-tests"),
    ])
    .await;
    let writer = hs256(
        json!({"sub": "svc-\"o\"", "role": "read-write", "iss": "queen-tests",
        "exp": now() + 600}),
    );
    let q = unique("exact");
    let trace = uuid::Uuid::now_v7().to_string();
    let (status, pushed) = call(
        &b,
        reqwest::Method::POST,
        "/api/v1/push",
        Some(&writer),
        Some(json!({"items": [
            {"queue": q, "partition": "p \"1\"", "transactionId": "full-1", "traceId": trace,
             "payload": {"a": [1, "x", null], "b": {"c": "é\n"}}},
            {"queue": q, "partition": "p \"1\"", "transactionId": "full-\"2\"\\é",
             "payload": "text"}
        ]})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{pushed}");
    let resp = b
        .http
        .get(b.url(&pop_path(&q, None, "batch=10&consumerGroup=g")))
        .bearer_auth(&writer)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let text = resp.text().await.unwrap();
    let body: Value = serde_json::from_str(&text).unwrap();
    let lease = body["leaseId"].as_str().unwrap();
    let partition = pushed[0]["partition_id"].as_str().unwrap();
    let (id1, id2) = (
        pushed[0]["message_id"].as_str().unwrap(),
        pushed[1]["message_id"].as_str().unwrap(),
    );
    let created: Vec<&str> = (0..2)
        .map(|i| body["messages"][i]["createdAt"].as_str().unwrap())
        .collect();
    for c in &created {
        assert!(is_utc_timestamp(c, 6), "createdAt {c}");
    }
    let tail = format!(
        r#""partitionId":"{partition}","partition":"p \"1\"","leaseId":"{lease}","consumerGroup":"g","queue":"{q}","deliveryAttempt":1}}"#
    );
    let expected = format!(
        concat!(
            r#"{{"success":true,"queue":"{q}","partition":"p \"1\"","partitionId":"{partition}","#,
            r#""leaseId":"{lease}","consumerGroup":"g","partitionsClaimed":1,"messages":["#,
            r#"{{"id":"{id1}","transactionId":"full-1","traceId":"{trace}","#,
            r#""data":{{"a":[1,"x",null],"b":{{"c":"é\n"}}}},"producerSub":"svc-\"o\"","#,
            r#""createdAt":"{c1}",{tail},"#,
            r#"{{"id":"{id2}","transactionId":"full-\"2\"\\é","traceId":null,"data":"text","#,
            r#""producerSub":"svc-\"o\"","createdAt":"{c2}",{tail}]}}"#
        ),
        q = q,
        partition = partition,
        lease = lease,
        id1 = id1,
        id2 = id2,
        trace = trace,
        c1 = created[0],
        c2 = created[1],
        tail = tail,
    );
    assert_eq!(text, expected);
}
