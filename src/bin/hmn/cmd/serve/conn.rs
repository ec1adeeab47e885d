//! The listener of `hmn serve`: at most `MAX_CONNECTIONS` open connections, and each one closed
//! after `IDLE_TIMEOUT` without progress, so clients that connect and stall (or stop reading)
//! cannot pile up. Every connection is served by its own task (axum), so a slow one never
//! delays the others.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// Most connections served at once; more wait in the kernel's backlog.
pub const MAX_CONNECTIONS: usize = 256;
/// A connection that neither sends nor takes a byte for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// A TCP listener that hands out [`Conn`]s.
#[derive(Debug)]
pub struct Limited {
    inner: TcpListener,
    slots: Arc<Semaphore>,
    idle: Duration,
}

impl Limited {
    pub fn new(inner: TcpListener, max: usize, idle: Duration) -> Self {
        Self {
            inner,
            slots: Arc::new(Semaphore::new(max)),
            idle,
        }
    }
}

impl axum::serve::Listener for Limited {
    type Io = Conn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Conn, SocketAddr) {
        loop {
            // The semaphore is never closed, so a permit always comes.
            let permit = Arc::clone(&self.slots).acquire_owned().await.ok();
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    // Responses are written whole; Nagle would only delay them.
                    let _ = stream.set_nodelay(true);
                    return (Conn::new(stream, self.idle, permit), addr);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::ConnectionRefused
                    ) => {}
                // Out of file descriptors and the like: give others time to close theirs.
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// One accepted connection: its reads and writes fail with `TimedOut` once it has made no
/// progress for the idle timeout, which makes hyper drop it.
#[derive(Debug)]
pub struct Conn {
    stream: TcpStream,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    _slot: Option<OwnedSemaphorePermit>,
}

impl Conn {
    fn new(stream: TcpStream, idle: Duration, slot: Option<OwnedSemaphorePermit>) -> Self {
        Self {
            stream,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
            _slot: slot,
        }
    }

    /// Progress was made: the idle clock starts again.
    fn touch(&mut self) {
        let next = Instant::now() + self.idle;
        self.deadline.as_mut().reset(next);
    }

    /// What a pending operation turns into: still pending, or a timeout once idle too long.
    fn pending<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "connection idle for too long",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progress<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match poll {
            Poll::Pending => self.pending(cx),
            ready @ Poll::Ready(_) => {
                self.touch();
                ready
            }
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.stream).poll_read(cx, buf);
        this.progress(cx, poll)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.progress(cx, poll)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.progress(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.stream).poll_flush(cx);
        this.progress(cx, poll)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// One read on `conn` (tokio's `io-util` helpers are not compiled in).
    async fn read(conn: &mut Conn, buf: &mut [u8]) -> io::Result<usize> {
        std::future::poll_fn(|cx| {
            let mut b = ReadBuf::new(buf);
            Pin::new(&mut *conn)
                .poll_read(cx, &mut b)
                .map_ok(|()| b.filled().len())
        })
        .await
    }

    async fn send(client: &TcpStream, bytes: &[u8]) {
        client.writable().await.unwrap();
        assert_eq!(client.try_write(bytes).unwrap(), bytes.len());
    }

    async fn pair(idle: Duration, max: usize) -> (Limited, SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        (Limited::new(l, max, idle), addr)
    }

    #[tokio::test]
    async fn idle_connections_time_out_and_busy_ones_do_not() {
        use axum::serve::Listener as _;
        let (mut l, addr) = pair(Duration::from_millis(300), 4).await;
        let client = TcpStream::connect(addr).await.unwrap();
        let (mut conn, _) = l.accept().await;
        // Traffic every 100 ms keeps it open well past the idle time.
        for _ in 0..6 {
            send(&client, b"x").await;
            let mut b = [0_u8; 1];
            assert_eq!(read(&mut conn, &mut b).await.unwrap(), 1);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let started = std::time::Instant::now();
        let mut b = [0_u8; 1];
        let e = read(&mut conn, &mut b).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        // 300 ms after the last byte, of which 100 ms had passed.
        assert!(started.elapsed() >= Duration::from_millis(150));
    }

    #[tokio::test]
    async fn connections_beyond_the_limit_wait_for_a_slot() {
        use axum::serve::Listener as _;
        let (mut l, addr) = pair(Duration::from_secs(60), 1).await;
        let _a = TcpStream::connect(addr).await.unwrap();
        let (first, _) = l.accept().await;
        let _b = TcpStream::connect(addr).await.unwrap();
        let waiting = tokio::time::timeout(Duration::from_millis(200), l.accept()).await;
        assert!(waiting.is_err(), "a second slot was handed out");
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(5), l.accept()).await;
        assert!(second.is_ok());
    }
}
