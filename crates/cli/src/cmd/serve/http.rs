//! The HTTP side of `hmn serve`: an accept loop over hyper's HTTP/1 server, built so that no
//! client can hold the exporter without finishing a request.
//!
//! - Each request head must arrive whole within [`Limits::head`] of the connection becoming
//!   ready for it (hyper's header read timeout): a client trickling a byte at a time is closed,
//!   and so is a keep-alive connection left idle that long.
//! - A connection whose reads and writes make no progress for [`Limits::idle`] is closed (a
//!   client that stops reading its response).
//! - At most [`Limits::max`] connections are open. A connection beyond that closes the one that
//!   has waited longest without a request in flight; only when every open connection is being
//!   answered does a new one wait for a slot.
//! - A client that half-closes its side after sending its request is still answered.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Notify;

use super::conn::Conn;

/// How connections are bounded.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most connections open at once.
    pub max: usize,
    /// The time a request head has to arrive whole.
    pub head: Duration,
    /// The time a connection may make no progress at all.
    pub idle: Duration,
}

impl Limits {
    /// What `hmn serve` runs with.
    pub const DEFAULT: Self = Self {
        max: 256,
        head: Duration::from_secs(5),
        idle: Duration::from_secs(60),
    };
}

/// The open connections: for each, whether a request is in flight and since when it has been
/// waiting for one, and how to close it.
#[derive(Debug, Default)]
struct Table {
    slots: Mutex<BTreeMap<u64, Slot>>,
    /// A connection ended.
    freed: Notify,
}

#[derive(Debug)]
struct Slot {
    /// Requests being answered.
    busy: usize,
    /// When it last became free of requests (or was accepted).
    idle_since: Instant,
    close: Arc<Notify>,
}

impl Table {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Slot>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn open(&self, id: u64) -> Arc<Notify> {
        let close = Arc::new(Notify::new());
        self.lock().insert(
            id,
            Slot {
                busy: 0,
                idle_since: Instant::now(),
                close: Arc::clone(&close),
            },
        );
        close
    }

    fn closed(&self, id: u64) {
        self.lock().remove(&id);
        self.freed.notify_one();
    }

    fn len(&self) -> usize {
        self.lock().len()
    }

    /// Asks the connection that has waited longest without a request to close; `false` when
    /// every connection has one in flight.
    fn close_oldest_idle(&self) -> bool {
        let slots = self.lock();
        let oldest = slots
            .values()
            .filter(|s| s.busy == 0)
            .min_by_key(|s| s.idle_since);
        match oldest {
            Some(s) => {
                s.close.notify_one();
                true
            }
            None => false,
        }
    }

    fn start(&self, id: u64) {
        if let Some(s) = self.lock().get_mut(&id) {
            s.busy += 1;
        }
    }

    fn finish(&self, id: u64) {
        if let Some(s) = self.lock().get_mut(&id) {
            s.busy = s.busy.saturating_sub(1);
            if s.busy == 0 {
                s.idle_since = Instant::now();
            }
        }
    }
}

/// Marks a request of connection `id` in flight while it lives.
struct InFlight {
    table: Arc<Table>,
    id: u64,
}

impl InFlight {
    fn new(table: &Arc<Table>, id: u64) -> Self {
        table.start(id);
        Self {
            table: Arc::clone(table),
            id,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.table.finish(self.id);
    }
}

/// Serves `app` on `listener` until `stop` resolves, then lets requests in flight finish for
/// up to `grace`. Returns what `stop` resolved to, and whether every connection closed in time.
pub async fn serve<T>(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    stop: impl Future<Output = T>,
    grace: Duration,
) -> (T, bool) {
    let table = Arc::new(Table::default());
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.head)
        .half_close(true);
    tokio::pin!(stop);
    let mut next_id = 0_u64;
    let stopped = loop {
        // Room for one more: close the longest-idle connection, or wait for one to end.
        if table.len() >= limits.max.max(1) {
            let _ = table.close_oldest_idle();
            tokio::select! {
                () = table.freed.notified() => continue,
                why = &mut stop => break why,
            }
        }
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    pause_after(&e).await;
                    continue;
                }
            },
            why = &mut stop => break why,
        };
        let id = next_id;
        next_id += 1;
        let close = table.open(id);
        let service = {
            let table = Arc::clone(&table);
            let app = TowerToHyperService::new(app.clone());
            hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                let in_flight = InFlight::new(&table, id);
                let answer = hyper::service::Service::call(&app, request);
                async move {
                    let response = answer.await;
                    drop(in_flight);
                    response
                }
            })
        };
        let io = TokioIo::new(Conn::new(stream, limits.idle));
        let connection = graceful.watch(http.serve_connection(io, service));
        let table = Arc::clone(&table);
        tokio::spawn(async move {
            tokio::select! {
                _ = connection => {}
                () = close.notified() => {}
            }
            table.closed(id);
        });
    };
    let all_closed = tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_ok();
    (stopped, all_closed)
}

/// After a failed accept: nothing for a connection the client gave up on, a short pause when
/// out of file descriptors and the like (others get time to close theirs).
async fn pause_after(e: &io::Error) {
    if !matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
    ) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
