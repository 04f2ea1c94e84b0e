//! Payload encryption at rest (http-api.md §5.14).

use serde_json::json;

use crate::common::*;

const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_of_encrypted_queues_are_stored_sealed_and_read_in_clear() {
    let (db, b) = setup_with(&[("QUEEN_ENCRYPTION_KEY", KEY)]).await;
    let secret_q = unique("enc");
    let plain_q = unique("plain");
    configure(
        &b,
        &secret_q,
        json!({"encryptionEnabled": true, "retryLimit": 0}),
    )
    .await;
    push_items(&b, json!([{"queue": secret_q, "partition": "p", "payload": {"card": "4111-1111"}, "transactionId": "s1"}])).await;
    push_items(&b, json!([{"queue": plain_q, "partition": "p", "payload": {"card": "5500-0000"}, "transactionId": "p1"}])).await;

    let client = db.client().await.unwrap();
    let stored: Vec<String> = texts(
        &client,
        "SELECT unnest(payloads) FROM queen.segments ORDER BY created_at",
    )
    .await;
    assert_eq!(stored.len(), 2);
    assert!(!stored[0].contains("4111"), "{}", stored[0]);
    let envelope: serde_json::Value = serde_json::from_str(&stored[0]).unwrap();
    for k in ["encrypted", "iv", "authTag"] {
        assert!(envelope[k].is_string(), "{envelope}");
    }
    assert!(
        stored[1].contains("5500"),
        "queues without the flag stay plaintext"
    );

    let body = pop_ok(&b, &pop_path(&secret_q, None, "")).await;
    let msg = &messages(&body)[0];
    assert_eq!(msg["data"], json!({"card": "4111-1111"}));
    let (_, detail) = b
        .get(&format!(
            "/api/v1/messages/{}/s1",
            msg["partitionId"].as_str().unwrap()
        ))
        .await;
    assert_eq!(detail["payload"], json!({"card": "4111-1111"}));
    assert_eq!(detail["isEncrypted"], true);
    ack(&b, msg, "failed", Some("boom")).await;
    let (_, dlq) = b.get(&format!("/api/v1/dlq?queue={secret_q}")).await;
    assert_eq!(dlq["messages"][0]["data"], json!({"card": "4111-1111"}));
    let dead: String = client
        .query_one("SELECT payload FROM queen.dead_letters", &[])
        .await
        .unwrap()
        .get(0);
    assert!(!dead.contains("4111"), "the DLQ copy stays sealed at rest");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_the_flag_is_ignored() {
    let (db, b) = setup().await;
    let q = unique("nokey");
    configure(&b, &q, json!({"encryptionEnabled": true})).await;
    push_items(&b, json!([{"queue": q, "payload": {"x": "visible"}}])).await;
    let client = db.client().await.unwrap();
    let stored: String = client
        .query_one("SELECT payloads[1] FROM queen.segments", &[])
        .await
        .unwrap()
        .get(0);
    assert!(stored.contains("visible"));
}

#[test]
fn a_malformed_key_is_refused_by_name() {
    let env: std::collections::HashMap<String, String> =
        [("QUEEN_ENCRYPTION_KEY".to_owned(), "abc".to_owned())]
            .into_iter()
            .collect();
    let e = queen_server::config::Config::from_env(&env).unwrap_err();
    assert_eq!(e.var, "QUEEN_ENCRYPTION_KEY");
    assert!(!e.to_string().contains("abc"), "the key is not echoed");
}
