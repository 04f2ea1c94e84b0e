//! A consumer with four workers that renews its leases and stops on Ctrl-C.
//!
//! ```sh
//! cargo run -p queen-client --example consume -- http://localhost:6632
//! ```

mod common;

use std::time::Duration;

use queen_client::CancellationToken;

#[tokio::main]
async fn main() -> queen_client::Result<()> {
    let client = common::client_from_args()?;
    let stop = CancellationToken::new();
    {
        let stop = stop.clone();
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            stop.cancel();
        });
    }
    let stats = client
        .queue("example-orders")
        .group("example-billing")
        .concurrency(4)
        .batch(10)
        .renew_lease(Some(Duration::from_secs(10)))
        .until(stop)
        .consume(|msg| async move {
            println!("{} {}", msg.partition, msg.data);
            if msg.data.get("amount").is_none() {
                // a failed handler nacks: retried, then dead-lettered
                return Err(format!("message {} has no amount", msg.transaction_id));
            }
            Ok(())
        })
        .await?;
    println!("{stats:?}");
    Ok(())
}
