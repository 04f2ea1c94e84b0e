//! Received hints leave the mesh through a bounded channel, so the mesh never
//! calls into the broker: the broker side reads the [`HintInbox`] and decides
//! what each hint does. Heartbeats and HELLOs stay inside the mesh.

use std::sync::Arc;

use queen_proto::mesh::{
    Frame, MaintenanceModeSet, MessageAvailable, PartitionFree, QueueConfigInvalidate,
};
use tokio::sync::mpsc;

/// Hints the inbox holds before the listener waits for the broker side
/// (the same bound as a peer's send queue).
const INBOX_HINTS: usize = super::PEER_QUEUE_FRAMES;

/// A hint a peer sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hint {
    MessageAvailable(MessageAvailable),
    PartitionFree(PartitionFree),
    QueueConfigInvalidate(QueueConfigInvalidate),
    MaintenanceModeSet(MaintenanceModeSet),
}

impl Hint {
    /// The hint a frame carries; `None` for heartbeats and HELLOs.
    fn from_frame(frame: Frame) -> Option<Self> {
        match frame {
            Frame::MessageAvailable(h) => Some(Self::MessageAvailable(h)),
            Frame::PartitionFree(h) => Some(Self::PartitionFree(h)),
            Frame::QueueConfigInvalidate(h) => Some(Self::QueueConfigInvalidate(h)),
            Frame::MaintenanceModeSet(h) => Some(Self::MaintenanceModeSet(h)),
            Frame::Heartbeat(_) | Frame::Hello(_) => None,
        }
    }
}

/// The receiving end: what peers sent, for the broker to apply.
#[derive(Debug)]
pub struct HintInbox {
    rx: mpsc::Receiver<(Hint, Arc<str>)>,
}

impl HintInbox {
    /// The next hint and who sent it (`server_id (address)`; the id is only a
    /// claim in the base mode); `None` once the mesh stopped.
    pub async fn recv(&mut self) -> Option<(Hint, Arc<str>)> {
        self.rx.recv().await
    }
}

/// The listener's end of the inbox.
#[derive(Debug, Clone)]
pub(super) struct HintSender {
    tx: mpsc::Sender<(Hint, Arc<str>)>,
}

impl HintSender {
    /// Hands a received frame on if it is a hint. Waits while the inbox is
    /// full (that slows the one peer connection, nothing else); a closed
    /// inbox (shutdown) drops it.
    pub(super) async fn forward(&self, frame: Frame, from: &Arc<str>) {
        if let Some(hint) = Hint::from_frame(frame) {
            let _ = self.tx.send((hint, from.clone())).await;
        }
    }
}

pub(super) fn inbox() -> (HintSender, HintInbox) {
    let (tx, rx) = mpsc::channel(INBOX_HINTS);
    (HintSender { tx }, HintInbox { rx })
}

#[cfg(test)]
mod tests {
    use super::*;
    use queen_proto::mesh::Heartbeat;

    #[tokio::test]
    async fn only_hints_reach_the_inbox() {
        let (tx, mut rx) = inbox();
        let from: Arc<str> = "a".into();
        tx.forward(
            Frame::Heartbeat(Heartbeat {
                server_id: "a".into(),
            }),
            &from,
        )
        .await;
        let hint = MessageAvailable {
            queue: "q".into(),
            partition: "p".into(),
        };
        tx.forward(Frame::MessageAvailable(hint.clone()), &from)
            .await;
        drop(tx);
        assert_eq!(rx.recv().await, Some((Hint::MessageAvailable(hint), from)));
        assert_eq!(rx.recv().await, None);
    }
}
