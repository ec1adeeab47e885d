//! `hmn serve --check`: is a server answering on the --listen address? For container health
//! checks, where the image has no HTTP client: asks for `/` (which does not measure) and exits 0
//! on a 200 answer, 1 on anything else, saying what was wrong.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::outcome::Outcome;

/// How long the whole check may take: connecting, asking and the answer's status line,
/// whatever the peer does (one that trickles a byte at a time included).
const TIMEOUT: Duration = Duration::from_secs(3);
/// The most of the answer read: its status line is all that counts.
const HEAD_LIMIT: u64 = 4096;

/// Where to connect for a server listening on `listen`: an unspecified address (`0.0.0.0`,
/// `[::]`) is reached through loopback of the same family.
pub fn target(listen: SocketAddr) -> SocketAddr {
    let mut addr = listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(if addr.is_ipv4() {
            Ipv4Addr::LOCALHOST.into()
        } else {
            Ipv6Addr::LOCALHOST.into()
        });
    }
    addr
}

/// The status code of an HTTP answer's first line (`HTTP/1.x 200 OK`).
pub fn status_of(head: &str) -> Option<u16> {
    let line = head.lines().next()?;
    let mut words = line.split(' ');
    if !words.next()?.starts_with("HTTP/") {
        return None;
    }
    words.next()?.parse().ok()
}

/// The time left before `deadline`, or a `TimedOut` error saying the server did not answer.
fn left(deadline: Instant, within: Duration) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("did not answer within {} s", within.as_secs()),
        ));
    }
    Ok(left)
}

/// The head of the answer, up to its status line's end (or [`HEAD_LIMIT`] bytes, or the end of
/// the stream), all of it within `within` from now.
fn ask(addr: SocketAddr, within: Duration) -> io::Result<String> {
    let deadline = Instant::now() + within;
    let mut stream = TcpStream::connect_timeout(&addr, left(deadline, within)?)?;
    stream.set_write_timeout(Some(left(deadline, within)?))?;
    stream.write_all(format!("GET / HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())?;
    let mut answer = Vec::new();
    let mut buf = [0_u8; 512];
    while !answer.contains(&b'\n') && (answer.len() as u64) < HEAD_LIMIT {
        stream.set_read_timeout(Some(left(deadline, within)?))?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(buf.get(..n).unwrap_or_default()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                left(deadline, within)?;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // A peer that resets the connection after answering still answered.
            Err(_) if !answer.is_empty() => break,
            Err(e) => return Err(e),
        }
    }
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

/// Runs the check against the server meant to listen on `listen`.
pub fn run(listen: SocketAddr, err: &mut impl Write) -> io::Result<Outcome> {
    let addr = target(listen);
    match ask(addr, TIMEOUT) {
        Ok(answer) => match status_of(&answer) {
            Some(200) => Ok(Outcome::Success),
            Some(code) => {
                writeln!(
                    err,
                    "hmn: the server on {addr} answered HTTP {code}, not 200"
                )?;
                Ok(Outcome::Code(1))
            }
            None => {
                writeln!(err, "hmn: what answered on {addr} is not an HTTP server")?;
                Ok(Outcome::Code(1))
            }
        },
        Err(e) if e.kind() == io::ErrorKind::TimedOut => {
            writeln!(err, "hmn: the server on {addr} {e}")?;
            Ok(Outcome::Code(1))
        }
        Err(e) => {
            writeln!(err, "hmn: no server answering on {addr}: {e}")?;
            Ok(Outcome::Code(1))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_addresses_are_reached_through_loopback() {
        assert_eq!(
            target("0.0.0.0:10466".parse().unwrap()),
            "127.0.0.1:10466".parse().unwrap()
        );
        assert_eq!(
            target("[::]:7".parse().unwrap()),
            "[::1]:7".parse().unwrap()
        );
        assert_eq!(
            target("10.1.2.3:80".parse().unwrap()),
            "10.1.2.3:80".parse().unwrap()
        );
    }

    #[test]
    fn status_lines() {
        assert_eq!(status_of("HTTP/1.1 200 OK\r\nx: y\r\n"), Some(200));
        assert_eq!(status_of("HTTP/1.0 404 Not Found\r\n"), Some(404));
        assert_eq!(status_of("SSH-2.0-OpenSSH_9.2\r\n"), None);
        assert_eq!(status_of("HTTP/1.1 abc\r\n"), None);
        assert_eq!(status_of(""), None);
    }

    /// A peer that trickles a byte every 2 s (never a whole status line), and one that accepts
    /// and says nothing: the whole check ends within its limit and says the server did not
    /// answer (it ran for hours before, each read having its own 3 s).
    #[test]
    fn a_trickling_or_silent_peer_ends_the_check_within_its_limit() {
        use std::net::TcpListener;
        for trickle in [true, false] {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let peer = std::thread::spawn(move || {
                let (mut s, _) = listener.accept().unwrap();
                for _ in 0..4 {
                    if trickle {
                        let _ = s.write_all(b"H");
                    }
                    std::thread::sleep(Duration::from_secs(2));
                }
            });
            let t = Instant::now();
            let e = ask(addr, Duration::from_secs(1)).unwrap_err();
            let took = t.elapsed();
            assert!(took < Duration::from_millis(2500), "{took:?}");
            assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
            assert_eq!(e.to_string(), "did not answer within 1 s");
            let mut said = Vec::new();
            let t = Instant::now();
            let outcome = run(addr, &mut said).unwrap();
            assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
            assert!(matches!(outcome, Outcome::Code(1)));
            assert_eq!(
                String::from_utf8(said).unwrap(),
                format!("hmn: the server on {addr} did not answer within 3 s\n")
            );
            drop(peer);
        }
    }
}
