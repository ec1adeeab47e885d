//! One accepted connection of `hmn serve`: its reads and writes fail with `TimedOut` once it
//! has made no progress for the idle timeout (a client that stops reading its response), which
//! makes hyper drop it. Request heads have their own deadline (see `http.rs`).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// One accepted connection: its reads and writes fail with `TimedOut` once it has made no
/// progress for the idle timeout, which makes hyper drop it.
#[derive(Debug)]
pub struct Conn {
    stream: TcpStream,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl Conn {
    pub fn new(stream: TcpStream, idle: Duration) -> Self {
        // Responses are written whole; Nagle would only delay them.
        let _ = stream.set_nodelay(true);
        Self {
            stream,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
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

    /// A connected client and the server side of its connection.
    async fn pair(idle: Duration) -> (TcpStream, Conn) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (server, _) = l.accept().await.unwrap();
        (client, Conn::new(server, idle))
    }

    #[tokio::test]
    async fn idle_connections_time_out_and_busy_ones_do_not() {
        let (client, mut conn) = pair(Duration::from_millis(300)).await;
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
}
