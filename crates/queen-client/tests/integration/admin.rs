//! Admin calls, JWT and unreachable brokers.

use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use queen_client::{Client, Error, MessageFilter, PushStatus, QueueOptions, Seek};
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn queues_are_configured_listed_described_and_deleted() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let q = unique("adm");
    let r = c
        .queue(&q)
        .namespace("billing")
        .task("invoice")
        .configure(&QueueOptions {
            lease_time: 45,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(r.options["leaseTime"], 45);
    assert_eq!(r.namespace, "billing");
    let r = c
        .queue(&q)
        .configure_json(&json!({"retryLimit": 7}))
        .await
        .unwrap();
    // full replace: the lease time is back to its default
    assert_eq!(r.options["leaseTime"], 300);
    assert_eq!(r.options["retryLimit"], 7);
    c.queue(&q).partition("p1").push(&1).await.unwrap();

    let list = c.admin().queues().await.unwrap();
    assert!(list["queues"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["name"] == q.as_str()));
    let detail = c.admin().queue(&q).await.unwrap();
    assert_eq!(detail["totals"]["total"], 1, "{detail}");
    let overview = c.admin().overview().await.unwrap();
    assert!(overview["queues"].as_u64().unwrap() >= 1);
    assert!(c.admin().status().await.unwrap().is_object());

    let deleted = c.queue(&q).delete().await.unwrap();
    assert!(deleted.deleted && deleted.existed);
    assert!(!c.queue(&q).delete().await.unwrap().existed);
    let err = c.admin().queue(&q).await.unwrap_err();
    assert_eq!(err.status(), Some(404), "{err:?}");
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn health_metrics_and_maintenance() {
    let (_db, b) = setup().await;
    let c = client(&b);
    assert_eq!(c.admin().health().await.unwrap()["status"], "healthy");
    assert!(c.admin().metrics().await.unwrap()["database"].is_object());
    assert!(c
        .admin()
        .prometheus()
        .await
        .unwrap()
        .contains("queen_uptime_seconds"));

    let m = c.admin().maintenance().await.unwrap();
    assert!(!m.maintenance_mode && !m.pop_maintenance_mode);

    // pop maintenance: pops answer empty
    let q = unique("maint");
    c.queue(&q).push(&1).await.unwrap();
    c.admin().set_pop_maintenance(true).await.unwrap();
    assert!(c.admin().maintenance().await.unwrap().pop_maintenance_mode);
    assert!(c.queue(&q).wait(false).pop().await.unwrap().is_empty());
    c.admin().set_pop_maintenance(false).await.unwrap();
    assert_eq!(c.queue(&q).wait(false).pop().await.unwrap().len(), 1);

    // push maintenance: pushes are spooled and reported as such
    c.admin().set_maintenance(true).await.unwrap();
    assert!(c.admin().maintenance().await.unwrap().maintenance_mode);
    let r = c.queue(&q).push(&2).await;
    c.admin().set_maintenance(false).await.unwrap();
    match r {
        Ok(r) => assert_eq!(r.status, PushStatus::Buffered, "{r:?}"),
        // a broker without a usable spool refuses instead, retryably
        Err(e) => assert!(e.is_retryable(), "{e:?}"),
    }
}

#[tokio::test]
async fn groups_seek_and_delete() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let q = unique("grp");
    for n in 0..3 {
        c.queue(&q).push(&n).await.unwrap();
    }
    let m = c.queue(&q).group("g").wait(false).pop().await.unwrap();
    c.ack(&m[0]).await.unwrap();
    let groups = c.admin().consumer_groups().await.unwrap();
    assert!(
        groups
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "g" && g["queueName"] == q.as_str()),
        "{groups}"
    );
    let detail = c.admin().consumer_group("g").await.unwrap();
    assert!(detail[q.as_str()]["partitions"].is_array(), "{detail}");
    assert!(c.admin().lagging(0).await.unwrap().is_array());

    let r = c.admin().seek("g", &q, &Seek::ToEnd).await.unwrap();
    assert_eq!(r["success"], true, "{r}");
    assert!(drained(&c, &q, Some("g")).await);
    let r = c
        .admin()
        .seek("g", &q, &Seek::To("2000-01-01T00:00:00Z".into()))
        .await
        .unwrap();
    assert_eq!(r["success"], true);
    assert_eq!(
        c.queue(&q)
            .group("g")
            .batch(10)
            .wait(false)
            .pop()
            .await
            .unwrap()
            .len(),
        3
    );
    let r = c
        .admin()
        .seek_partition_to_end("g", &q, "Default")
        .await
        .unwrap();
    assert_eq!(r["success"], true, "{r}");
    let r = c
        .admin()
        .update_subscription("g", "2026-01-01T00:00:00Z")
        .await
        .unwrap();
    assert_eq!(r["success"], true, "{r}");
    let r = c
        .admin()
        .delete_consumer_group("g", Some(&q), true)
        .await
        .unwrap();
    assert_eq!(r["success"], true, "{r}");
    let r = c
        .admin()
        .delete_consumer_group("g", None, true)
        .await
        .unwrap();
    assert_eq!(r["success"], true, "{r}");
}

#[tokio::test]
async fn messages_are_listed_shown_deleted_and_retried() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let q = unique("msgs");
    let pushed = c.queue(&q).push(&json!({"k": 1})).await.unwrap();
    let PushStatus::Queued { partition_id, .. } = pushed.status else {
        panic!("{pushed:?}");
    };
    let filter = MessageFilter {
        queue: Some(q.clone()),
        ..Default::default()
    };
    let list = c.admin().messages(&filter).await.unwrap();
    assert_eq!(list["messages"].as_array().unwrap().len(), 1, "{list}");
    let one = c
        .admin()
        .message(&partition_id, &pushed.transaction_id)
        .await
        .unwrap();
    assert_eq!(one["payload"], json!({"k": 1}));

    // retry out of the DLQ: the 2.6 route; a broker without it answers 404
    match c
        .admin()
        .retry_message(&partition_id, &pushed.transaction_id)
        .await
    {
        Ok(v) => assert!(v.is_object()),
        Err(e) => assert_eq!(e.status(), Some(404), "{e:?}"),
    }
    match c.queue(&q).depth().await {
        Ok(v) => assert_eq!(v["pending"], 1, "{v}"),
        Err(e) => assert_eq!(e.status(), Some(404), "{e:?}"),
    }

    let r = c
        .admin()
        .delete_message(&partition_id, &pushed.transaction_id)
        .await
        .unwrap();
    assert_eq!(r["success"], true, "{r}");
    let err = c
        .admin()
        .message(&partition_id, &pushed.transaction_id)
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(404));
}

const SECRET: &str = "client-test-secret";

fn token(role: &str) -> String {
    let exp = chrono::Utc::now().timestamp() + 600;
    encode(
        &Header::new(Algorithm::HS256),
        &json!({"sub": "tester", "role": role, "exp": exp}),
        &EncodingKey::from_secret(SECRET.as_bytes()).unwrap(),
    )
    .unwrap()
}

#[tokio::test]
async fn tokens_are_sent_and_refusals_are_not_retried() {
    let (_db, b) = setup_with(&[("JWT_ENABLED", "true"), ("JWT_SECRET", SECRET)]).await;
    let q = unique("jwt");
    let anonymous = client(&b);
    let err = anonymous.queue(&q).push(&1).await.unwrap_err();
    assert_eq!(err.status(), Some(401), "{err:?}");
    assert!(!err.is_retryable());

    let writer = Client::builder()
        .url(b.url(""))
        .token(token("read-write"))
        .build()
        .unwrap();
    assert!(writer.queue(&q).push(&1).await.unwrap().is_accepted());
    let got = writer.queue(&q).wait(false).pop().await.unwrap();
    assert_eq!(got[0].producer_sub.as_deref(), Some("tester"));
    let err = writer.queue(&q).delete().await.unwrap_err();
    assert_eq!(err.status(), Some(403), "{err:?}");
    let admin = Client::builder()
        .url(b.url(""))
        .token(token("admin"))
        .build()
        .unwrap();
    assert!(admin.queue(&q).delete().await.unwrap().deleted);
    assert!(matches!(
        Client::builder().url(b.url("")).token("bad\ntoken").build(),
        Err(Error::Config(_))
    ));
}

#[tokio::test]
async fn an_unreachable_broker_is_a_retryable_connect_error_after_the_retries() {
    let port = queen_testkit::free_port().unwrap();
    let c = Client::builder()
        .url(format!("http://127.0.0.1:{port}"))
        .retry(quick_retries())
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let err = c.queue("q").push(&1).await.unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    assert!(err.is_retryable());
    // it backed off between attempts instead of failing at once
    assert!(started.elapsed() >= std::time::Duration::from_millis(30));
}
