//! Push, pop, ack, leases, transactions and the DLQ through the client.

use std::time::Duration;

use queen_client::{
    AckRequest, AckStatus, Client, Error, PushItem, PushStatus, QueueOptions, SubscriptionMode,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::common::*;

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Order {
    id: u64,
    amount: f64,
}

#[tokio::test]
async fn push_pop_ack_round_trip_with_typed_and_raw_payloads() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let q = unique("orders");
    let orders = c.queue(&q).partition("cust-42");

    let typed = orders
        .push(&Order {
            id: 1,
            amount: 12.5,
        })
        .await
        .unwrap();
    assert!(
        matches!(typed.status, PushStatus::Queued { .. }),
        "{typed:?}"
    );
    // the client made a UUID v7 transaction id
    let id = uuid::Uuid::parse_str(&typed.transaction_id).unwrap();
    assert_eq!(id.get_version_num(), 7);

    let results = orders
        .push_items(vec![
            PushItem::raw(r#" {"id": 2, "amount": 1} "#)
                .unwrap()
                .transaction_id("order-2"),
            PushItem::new(&json!("plain text")).unwrap(),
            PushItem::raw("[1,2,3]").unwrap().transaction_id("order-2"),
        ])
        .await
        .unwrap();
    assert_eq!(results.len(), 3);
    assert!(matches!(results[0].status, PushStatus::Queued { .. }));
    assert!(matches!(results[1].status, PushStatus::Queued { .. }));
    // a repeated transaction id in one partition is a duplicate of the first
    let PushStatus::Duplicate { message_id } = &results[2].status else {
        panic!("{:?}", results[2]);
    };
    let PushStatus::Queued {
        message_id: first, ..
    } = &results[0].status
    else {
        unreachable!()
    };
    assert_eq!(message_id, first);
    assert_eq!(results[2].transaction_id, "order-2");

    let popped = c.queue(&q).batch(10).wait(false).pop().await.unwrap();
    assert_eq!(popped.len(), 3, "{popped:?}");
    assert_eq!(
        popped[0].data_as::<Order>().unwrap(),
        Order {
            id: 1,
            amount: 12.5
        }
    );
    assert_eq!(popped[1].data, json!({"id": 2, "amount": 1}));
    assert_eq!(popped[2].data, json!("plain text"));
    assert!(popped
        .iter()
        .all(|m| m.partition == "cust-42" && !m.lease_id.is_empty()));
    assert_eq!(popped[0].queue.as_deref(), Some(q.as_str()));

    // nothing more while the lease is held
    assert!(drained(&c, &q, None).await);

    let one = c.ack(&popped[0]).await.unwrap();
    assert!(one.success, "{one:?}");
    let rest = c
        .ack_batch(&popped[1..], AckStatus::Completed, None)
        .await
        .unwrap();
    assert_eq!(rest.len(), 2);
    assert!(rest.iter().all(|r| r.success), "{rest:?}");
    assert!(rest.last().unwrap().lease_released);
    assert!(drained(&c, &q, None).await);
    assert!(c
        .ack_batch(&[], AckStatus::Completed, None)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_waiting_pop_returns_when_a_push_lands() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let q = unique("wait");
    let waiter = {
        let c = c.clone();
        let q = q.clone();
        tokio::spawn(async move {
            c.queue(&q)
                .timeout(Duration::from_secs(10))
                .pop()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.queue(&q).push(&"wake").await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the parked pop answered")
        .unwrap();
    assert_eq!(got.len(), 1);
    // an empty long poll ends after its timeout with no messages
    let started = std::time::Instant::now();
    let empty = c
        .queue(unique("none"))
        .timeout(Duration::from_millis(300))
        .pop()
        .await
        .unwrap();
    assert!(empty.is_empty());
    assert!(started.elapsed() >= Duration::from_millis(250));
}

#[tokio::test]
async fn commit_on_delivery_takes_no_lease() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let q = unique("autoack");
    c.queue(&q).push(&1).await.unwrap();
    let got = c
        .queue(&q)
        .wait(false)
        .commit_on_delivery(true)
        .pop()
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].lease_id, "");
    assert!(drained(&c, &q, None).await);
}

#[tokio::test]
async fn groups_fan_out_and_subscription_modes_apply() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let q = unique("fan");
    c.queue(&q).push(&"old").await.unwrap();
    let a = c.queue(&q).group("a").wait(false).pop().await.unwrap();
    let bgroup = c.queue(&q).group("b").wait(false).pop().await.unwrap();
    assert_eq!(a.len(), 1);
    assert_eq!(bgroup.len(), 1);
    assert_eq!(a[0].consumer_group, "a");
    assert!(c.ack(&a[0]).await.unwrap().success);
    assert!(c.ack(&bgroup[0]).await.unwrap().success);
    // a group that starts at "new" does not see what was there before
    let fresh = c
        .queue(&q)
        .group("late")
        .subscription_mode(SubscriptionMode::New)
        .wait(false)
        .pop()
        .await
        .unwrap();
    assert!(fresh.is_empty(), "{fresh:?}");
    c.queue(&q).push(&"new").await.unwrap();
    let fresh = c.queue(&q).group("late").wait(false).pop().await.unwrap();
    assert_eq!(fresh.len(), 1);
    assert_eq!(fresh[0].data, json!("new"));
}

#[tokio::test]
async fn failed_acks_retry_then_dead_letter_and_the_dlq_lists_them() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let q = unique("dlq");
    let options = QueueOptions {
        retry_limit: 1,
        ..Default::default()
    };
    let configured = c.queue(&q).configure(&options).await.unwrap();
    assert!(configured.configured);
    assert_eq!(configured.options["retryLimit"], 1);
    c.queue(&q).push(&json!({"n": 1})).await.unwrap();

    let first = c.queue(&q).group("g").wait(false).pop().await.unwrap();
    let r = c
        .ack_with(&first[0], AckStatus::Failed, Some("boom"))
        .await
        .unwrap();
    assert!(r.success && !r.dlq, "{r:?}");
    let second = c.queue(&q).group("g").wait(false).pop().await.unwrap();
    assert_eq!(second[0].transaction_id, first[0].transaction_id);
    assert_eq!(
        (first[0].delivery_attempt, second[0].delivery_attempt),
        (Some(1), Some(2))
    );
    let r = c
        .ack_with(&second[0], AckStatus::Failed, Some("boom again"))
        .await
        .unwrap();
    assert!(r.dlq, "{r:?}");

    let page = c.queue(&q).group("g").dlq().get().await.unwrap();
    assert_eq!(page.total, 1);
    assert_eq!(
        page.messages[0].error_message.as_deref(),
        Some("boom again")
    );
    assert_eq!(page.messages[0].data, json!({"n": 1}));
    assert_eq!(page.messages[0].consumer_group, "g");
    // filters: another group has none; the whole-DLQ query finds it by queue
    assert_eq!(
        c.queue(&q).group("other").dlq().get().await.unwrap().total,
        0
    );
    assert_eq!(
        c.dlq()
            .queue(&q)
            .limit(1)
            .get()
            .await
            .unwrap()
            .messages
            .len(),
        1
    );

    // dead-letter by ids, as a script would
    c.queue(&q).push(&json!({"n": 2})).await.unwrap();
    let m = c.queue(&q).wait(false).pop().await.unwrap().remove(0);
    let req = AckRequest::new(&m.partition_id, &m.transaction_id)
        .lease_id(&m.lease_id)
        .status(AckStatus::Dlq)
        .error("by hand");
    assert!(c.ack_ids(&req).await.unwrap().dlq);
    let page = c.dlq().queue(&q).get().await.unwrap();
    assert_eq!(page.total, 2);
}

#[tokio::test]
async fn leases_renew_until_they_are_released() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let q = unique("lease");
    c.queue(&q).push(&1).await.unwrap();
    let m = c.queue(&q).wait(false).pop().await.unwrap().remove(0);
    let r = c.renew(&m.lease_id, 120).await.unwrap();
    assert!(r.success, "{r:?}");
    assert_eq!(r.renewed, 1);
    assert!(r.expires_at.is_some());
    c.ack(&m).await.unwrap();
    let gone = c.renew(&m.lease_id, 120).await.unwrap();
    assert!(!gone.success);
    assert!(gone.error.is_some());
    let unknown = c
        .renew(&uuid::Uuid::new_v4().to_string(), 10)
        .await
        .unwrap();
    assert!(!unknown.success);
    assert!(matches!(c.renew("", 10).await, Err(Error::InvalidInput(_))));
}

#[tokio::test]
async fn a_transaction_commits_acks_and_pushes_together_or_not_at_all() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let (q1, q2) = (unique("stage1"), unique("stage2"));
    c.queue(&q1).push(&json!({"total": 99})).await.unwrap();
    let input = c.queue(&q1).group("etl").wait(false).pop().await.unwrap();
    let result = c
        .transaction()
        .ack(&input[0])
        .push(&q2, "p", &input[0].data)
        .unwrap()
        .commit()
        .await
        .unwrap();
    assert!(result.success);
    assert_eq!(result.results.len(), 2, "{result:?}");
    let out = drain(&c, &q2).await;
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].data, json!({"total": 99}));
    assert_eq!(out[0].partition, "p");
    // the input is consumed for the group
    assert!(c
        .queue(&q1)
        .group("etl")
        .wait(false)
        .pop()
        .await
        .unwrap()
        .is_empty());

    // an ack of an unknown message fails the whole transaction: its push is not applied
    let mut ghost = input[0].clone();
    ghost.transaction_id = "no-such-message".into();
    let err = c
        .transaction()
        .push(&q2, "p", &"must not land")
        .unwrap()
        .ack(&ghost)
        .commit()
        .await
        .unwrap_err();
    let Error::TransactionFailed { error, .. } = &err else {
        panic!("{err:?}");
    };
    assert!(error.contains("not found"), "{error}");
    assert!(!err.is_retryable());
    assert!(drain(&c, &q2).await.is_empty());
    assert!(matches!(
        c.transaction().commit().await,
        Err(Error::InvalidInput(_))
    ));
}

#[tokio::test]
async fn traces_are_recorded_and_read_back() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let q = unique("traced");
    c.queue(&q).push(&1).await.unwrap();
    let m = c.queue(&q).wait(false).pop().await.unwrap().remove(0);
    let name = unique("tenant");
    let r = c
        .trace(&m, &[&name], "info", &json!({"step": "parsed"}))
        .await
        .unwrap();
    assert_eq!(r["success"], true, "{r}");
    let traces = c
        .admin()
        .traces(&m.partition_id, &m.transaction_id)
        .await
        .unwrap();
    assert_eq!(traces["traces"][0]["data"], json!({"step": "parsed"}));
    let by_name = c.admin().traces_by_name(&name, 10, 0).await.unwrap();
    assert_eq!(by_name["total"], 1, "{by_name}");
    let names = c.admin().trace_names(100, 0).await.unwrap();
    assert!(names["trace_names"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["trace_name"] == name.as_str()));
}

#[tokio::test]
async fn bad_names_are_refused_before_anything_is_sent() {
    // nothing listens here: an InvalidInput proves no request was made
    let c = Client::new("http://127.0.0.1:9").unwrap();
    for err in [
        c.queue("").push(&1).await.unwrap_err(),
        c.queue("q").partition("a\nb").pop().await.unwrap_err(),
        c.queue("x".repeat(256)).delete().await.unwrap_err(),
        c.queue("q").configure_json(&json!([1])).await.unwrap_err(),
    ] {
        assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
        assert!(!err.is_retryable());
    }
    assert!(matches!(
        PushItem::raw("{nope"),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        Client::new("localhost:6632"),
        Err(Error::Config(_))
    ));
    assert!(matches!(Client::builder().build(), Err(Error::Config(_))));
}
