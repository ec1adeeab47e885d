//! `hmn serve --check`: is a server answering on the --listen address? For container health
//! checks, where the image has no HTTP client: asks for `/` (which does not measure) and exits 0
//! on a 200 answer, 1 on anything else, saying what was wrong.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::Duration;

use crate::outcome::Outcome;

/// How long the connection, the request and the answer may each take.
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

fn ask(addr: SocketAddr) -> io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT)?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    stream.write_all(format!("GET / HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())?;
    let mut answer = Vec::new();
    // A peer that resets the connection after answering still answered.
    if let Err(e) = stream.take(HEAD_LIMIT).read_to_end(&mut answer)
        && answer.is_empty()
    {
        return Err(e);
    }
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

/// Runs the check against the server meant to listen on `listen`.
pub fn run(listen: SocketAddr, err: &mut impl Write) -> io::Result<Outcome> {
    let addr = target(listen);
    match ask(addr) {
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
}
