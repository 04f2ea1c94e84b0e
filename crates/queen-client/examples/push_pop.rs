//! Push a few orders, pop them and ack them.
//!
//! ```sh
//! cargo run -p queen-client --example push_pop -- http://localhost:6632
//! ```

mod common;

use queen_client::PushItem;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Order {
    id: u64,
    amount: f64,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> queen_client::Result<()> {
    let client = common::client_from_args()?;
    let orders = client.queue("example-orders").partition("cust-42");

    let result = orders
        .push(&Order {
            id: 1,
            amount: 12.5,
        })
        .await?;
    println!("pushed: {:?}", result.status);
    // several in one request; a transaction id makes a repeat a duplicate
    let items = vec![
        PushItem::new(&Order { id: 2, amount: 3.0 })?.transaction_id("order-2"),
        PushItem::raw(r#"{"id": 3, "amount": 7.25}"#)?,
    ];
    for r in orders.push_items(items).await? {
        println!("pushed: {} {:?}", r.transaction_id, r.status);
    }

    let messages = client
        .queue("example-orders")
        .batch(10)
        .wait(false)
        .pop()
        .await?;
    for m in &messages {
        let order: Order = m.data_as()?;
        println!("popped {order:?} from {}", m.partition);
    }
    let acks = client
        .ack_batch(&messages, queen_client::AckStatus::Completed, None)
        .await?;
    println!("acked {}", acks.iter().filter(|a| a.success).count());
    Ok(())
}
