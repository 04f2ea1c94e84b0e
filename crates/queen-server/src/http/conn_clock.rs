//! The head and idle deadlines of one HTTP/1.1 connection.
//!
//! hyper has one deadline of its own, `header_read_timeout`, and starts it as
//! soon as it waits for a request head: on a new connection, and again right
//! after every answer. Alone, it would also be the idle timeout of a
//! keep-alive connection. [`ConnTimer`] is the timer hyper is given for one
//! connection; it makes hyper's deadline follow what the connection's bytes
//! say ([`Activity`], kept by the connection's stream):
//!
//! - on a new connection, the head must be complete `header` after it opened
//!   (hyper's own deadline);
//! - after an answer went out, the connection may stay silent for `idle`;
//! - once the first byte of the next request arrives, its head must be
//!   complete `header` after that byte; more bytes do not move it.
//!
//! A connection with a request in flight (a long-poll pop waiting for
//! messages) has no deadline here: hyper waits for no head then.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::rt::{Sleep, Timer};

/// What a connection's reads and writes tell about where it is.
#[derive(Debug, Default)]
pub struct Activity {
    /// The last write, while nothing was read since: an answer went out and
    /// the connection waits for the next request.
    idle_since: Option<Instant>,
    /// When the first byte after such a wait arrived.
    head_started: Option<Instant>,
}

/// [`Activity`], shared by the connection's stream and its timer.
#[derive(Debug, Clone, Default)]
pub struct SharedActivity(Arc<Mutex<Activity>>);

impl SharedActivity {
    fn lock(&self) -> MutexGuard<'_, Activity> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Bytes were read from the client.
    pub fn read(&self) {
        let mut a = self.lock();
        if a.idle_since.take().is_some() {
            a.head_started = Some(Instant::now());
        }
    }

    /// Bytes were written to the client.
    pub fn wrote(&self) {
        self.lock().idle_since = Some(Instant::now());
    }

    /// When a wait for a head that hyper began at `created`, with its own
    /// deadline `deadline`, ends.
    fn deadline(&self, created: Instant, deadline: Instant, limits: &Deadlines) -> Instant {
        let a = self.lock();
        match (a.idle_since, a.head_started) {
            (Some(since), _) => since + limits.idle,
            (None, Some(first_byte)) if first_byte >= created => first_byte + limits.header,
            _ => deadline,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Deadlines {
    header: Duration,
    idle: Duration,
}

/// The timer of one connection (see the module documentation).
#[derive(Debug, Clone)]
pub struct ConnTimer {
    activity: SharedActivity,
    limits: Deadlines,
}

impl ConnTimer {
    pub fn new(activity: SharedActivity, header: Duration, idle: Duration) -> Self {
        Self {
            activity,
            limits: Deadlines { header, idle },
        }
    }
}

impl Timer for ConnTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        Box::pin(PlainSleep(Box::pin(tokio::time::sleep(duration))))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        let created = Instant::now();
        let target = self.activity.deadline(created, deadline, &self.limits);
        Box::pin(HeadSleep {
            activity: self.activity.clone(),
            limits: self.limits,
            created,
            deadline,
            target,
            inner: Box::pin(tokio::time::sleep_until(target.into())),
        })
    }
}

/// A plain sleep (hyper asks for none on a server connection today).
struct PlainSleep(Pin<Box<tokio::time::Sleep>>);

impl Future for PlainSleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl Sleep for PlainSleep {}

/// hyper's wait for a head, its end recomputed from the activity each time
/// hyper looks at it (which it does whenever bytes arrive).
struct HeadSleep {
    activity: SharedActivity,
    limits: Deadlines,
    created: Instant,
    deadline: Instant,
    target: Instant,
    inner: Pin<Box<tokio::time::Sleep>>,
}

impl Future for HeadSleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let target = this
            .activity
            .deadline(this.created, this.deadline, &this.limits);
        if target != this.target {
            this.target = target;
            this.inner.as_mut().reset(target.into());
        }
        this.inner.as_mut().poll(cx)
    }
}

impl Sleep for HeadSleep {}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Deadlines = Deadlines {
        header: Duration::from_secs(10),
        idle: Duration::from_secs(30),
    };

    #[test]
    fn deadlines_follow_the_connection() {
        let a = SharedActivity::default();
        let opened = Instant::now();
        let hypers = opened + LIMITS.header;
        // a new connection: hyper's own deadline
        assert_eq!(a.deadline(opened, hypers, &LIMITS), hypers);
        // the first request's bytes do not move it
        a.read();
        assert_eq!(a.deadline(opened, hypers, &LIMITS), hypers);
        // an answer went out: idle from then
        a.wrote();
        let answered = a.lock().idle_since.unwrap();
        let waiting = Instant::now();
        let later = waiting + LIMITS.header;
        assert_eq!(a.deadline(waiting, later, &LIMITS), answered + LIMITS.idle);
        // the next request's first byte: the head deadline counts from it
        a.read();
        let first = a.lock().head_started.unwrap();
        assert!(first >= waiting);
        assert_eq!(a.deadline(waiting, later, &LIMITS), first + LIMITS.header);
        // more bytes do not move it
        a.read();
        assert_eq!(a.deadline(waiting, later, &LIMITS), first + LIMITS.header);
    }
}
