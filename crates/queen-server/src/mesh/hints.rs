//! What a received hint does on this replica.

use queen_proto::mesh::Frame;

use crate::broker::{Broker, ANY_QUEUE_KEY};

/// Applies one received frame. Heartbeats only prove the peer is alive.
pub(super) fn apply(broker: &Broker, frame: Frame) {
    match frame {
        Frame::MessageAvailable(h) => {
            broker.recent.record(&h.queue, &h.partition);
            broker.waker.notify(&h.queue);
            broker.waker.notify(ANY_QUEUE_KEY);
        }
        Frame::PartitionFree(h) => broker.waker.notify(&h.queue),
        Frame::QueueConfigInvalidate(h) => broker.queues.invalidate(&h.queue),
        Frame::MaintenanceModeSet(h) => {
            broker.apply_maintenance(h.mode, h.enabled);
        }
        Frame::Heartbeat(_) | Frame::Hello(_) => {}
    }
}
