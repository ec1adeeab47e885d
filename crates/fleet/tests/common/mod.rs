//! A stand-in Prometheus on loopback for the fleet's tests: it answers each query POSTed to it
//! with a handler's canned answer, and records the requests' `Authorization` headers.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a stand-in answers a query: status, body, delay.
pub type Handler = dyn Fn(&str) -> (u16, String, Duration) + Send + Sync;

/// A stand-in Prometheus: answers each query POSTed with `handler`; records the requests'
/// `Authorization` headers.
pub struct Standin {
    pub addr: SocketAddr,
    pub auth: Arc<Mutex<Vec<String>>>,
}

pub fn decode(form: &str, key: &str) -> Option<String> {
    form.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| {
            let mut out = Vec::new();
            let b = v.as_bytes();
            let mut i = 0;
            while i < b.len() {
                match b[i] {
                    b'+' => out.push(b' '),
                    b'%' if i + 2 < b.len() => {
                        out.push(u8::from_str_radix(&v[i + 1..i + 3], 16).unwrap());
                        i += 2;
                    }
                    c => out.push(c),
                }
                i += 1;
            }
            String::from_utf8(out).unwrap()
        })
    })
}

impl Standin {
    pub fn start(handler: Arc<Handler>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let auth = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&auth);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let handler = Arc::clone(&handler);
                let seen = Arc::clone(&seen);
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    loop {
                        let mut length = 0;
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        loop {
                            let mut h = String::new();
                            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                                return;
                            }
                            let h = h.trim_end();
                            if h.is_empty() {
                                break;
                            }
                            let (name, value) = h.split_once(':').unwrap();
                            match name.to_ascii_lowercase().as_str() {
                                "content-length" => length = value.trim().parse().unwrap(),
                                "authorization" => {
                                    seen.lock().unwrap().push(value.trim().to_string());
                                }
                                _ => {}
                            }
                        }
                        let mut body = vec![0; length];
                        reader.read_exact(&mut body).unwrap();
                        let form = String::from_utf8(body).unwrap();
                        let query = decode(&form, "query").unwrap_or_default();
                        let (status, answer, delay) = handler(&query);
                        std::thread::sleep(delay);
                        let head = format!(
                            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                            answer.len()
                        );
                        if stream.write_all(head.as_bytes()).is_err()
                            || stream.write_all(answer.as_bytes()).is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        Self { addr, auth }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}
