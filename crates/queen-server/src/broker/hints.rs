//! Wake-ups and cache invalidations, local and from the other replicas.
//!
//! A local event (a committed push, a released lease, a changed queue, a
//! maintenance switch) is applied here and announced to the peers through
//! the mesh. A hint a peer sent arrives through the mesh's inbox and is
//! applied by the same functions: [`Broker::messages_available`] is the one
//! place a "messages available" hint takes effect.

use std::sync::Arc;
use std::time::Duration;

use queen_proto::mesh::{Frame, MessageAvailable, PartitionFree, QueueConfigInvalidate};
use tokio_util::sync::CancellationToken;

use super::{Broker, ANY_QUEUE_KEY};
use crate::mesh::{Hint, HintInbox};

/// Applies the hints of `inbox` to `broker` until the mesh stops or `cancel`.
pub fn spawn_hint_applier(broker: Arc<Broker>, mut inbox: HintInbox, cancel: CancellationToken) {
    tokio::spawn(async move {
        loop {
            let (hint, from) = tokio::select! {
                h = inbox.recv() => match h {
                    Some(pair) => pair,
                    None => return,
                },
                _ = cancel.cancelled() => return,
            };
            broker.apply_hint(hint, &from);
        }
    });
}

impl Broker {
    /// Sends a hint to the other replicas, if the mesh runs.
    pub(super) fn announce(&self, frame: Frame) {
        if let Some(mesh) = &self.mesh {
            mesh.send(&frame);
        }
    }

    /// What a received hint does on this replica; `from` names the sender.
    pub(super) fn apply_hint(&self, hint: Hint, from: &str) {
        match hint {
            Hint::MessageAvailable(h) => self.messages_available(&h.queue, &h.partition),
            Hint::PartitionFree(h) => self.waker.notify(&h.queue),
            Hint::QueueConfigInvalidate(h) => self.queues.invalidate(&h.queue),
            Hint::MaintenanceModeSet(h) => self.apply_mesh_maintenance(h.mode, h.enabled, from),
        }
    }

    /// Messages became available on `queue`/`partition` (a push here or on a
    /// peer): the partition joins the queue's hint list and pops parked on
    /// the queue, and on any queue, wake.
    pub(super) fn messages_available(&self, queue: &str, partition: &str) {
        self.recent.record(queue, partition);
        self.waker.notify(queue);
        self.waker.notify(ANY_QUEUE_KEY);
    }

    /// A push committed on `queue`/`partition`: wakes pops parked here and on peers.
    pub(super) fn announce_messages(&self, queue: &str, partition: &str) {
        self.messages_available(queue, partition);
        self.announce(Frame::MessageAvailable(MessageAvailable {
            queue: queue.to_owned(),
            partition: partition.to_owned(),
        }));
    }

    /// A lease on `queue`/`partition` was released for `group`.
    pub(super) fn announce_partition_free(&self, queue: &str, partition: &str, group: &str) {
        self.waker.notify(queue);
        self.announce(Frame::PartitionFree(PartitionFree {
            queue: queue.to_owned(),
            partition: partition.to_owned(),
            consumer_group: group.to_owned(),
        }));
    }

    /// `queue`/`partition` rests for `after` (a retry hold, the queue's
    /// `retryDelay`): when it ends, pops parked on the queue, and on any
    /// queue, wake here, the partition is hinted again, and the peers are
    /// told as of a push, so a long poll there answers then too.
    pub(super) fn announce_after(&self, queue: &str, partition: &str, after: Duration) {
        let recent = Arc::clone(&self.recent);
        let mesh = self.mesh.clone();
        let (q, p) = (queue.to_owned(), partition.to_owned());
        self.waker.notify_after(
            vec![queue.to_owned(), ANY_QUEUE_KEY.to_owned()],
            after,
            self.shutdown.clone(),
            move || {
                recent.record(&q, &p);
                if let Some(mesh) = mesh {
                    mesh.send(&Frame::MessageAvailable(MessageAvailable {
                        queue: q,
                        partition: p,
                    }));
                }
            },
        );
    }

    /// A queue's configuration changed or it was deleted.
    pub(super) fn announce_config_change(&self, queue: &str) {
        self.queues.invalidate(queue);
        self.announce(Frame::QueueConfigInvalidate(QueueConfigInvalidate {
            queue: queue.to_owned(),
        }));
    }

    /// Drops long-poll notifiers nobody waits on (housekeeping).
    pub fn prune_waiters(&self) {
        self.waker.prune();
    }
}
