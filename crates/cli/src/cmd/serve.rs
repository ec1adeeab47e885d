//! `hmn serve`: a Prometheus/OpenMetrics exporter on `/metrics`.
//!
//! A scrape that finds a measurement younger than `--min-interval` gets it as it is; otherwise
//! one measurement is made for every scrape waiting (`exporter.rs`), and a measurement stalled
//! in a driver call answers with the last figures marked stale. While NVML answers, the
//! `nvidia-smi` fallback's health is probed on a thread of its own (`probe.rs`), not at each
//! measurement. SIGTERM and Ctrl-C stop the server gracefully.

mod allocation;
mod check;
mod conn;
mod exporter;
mod exposition;
mod http;
mod measure;
mod model;
mod probe;

use std::future::Future;
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use clap::Args;

use crate::args::{self, RootArgs};
use crate::outcome::Outcome;
use exporter::Exporter;

/// What `/metrics` is served as (prometheus-client writes `OpenMetrics`, ending with `# EOF`).
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// What it is served as to clients that ask for the Prometheus text format and not `OpenMetrics`.
const CLASSIC_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// How long in-flight scrapes may take to finish once a stop signal came.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// The page at `/`.
const INDEX: &str = "hmn serve: GPU memory metrics for Prometheus (hypomnesis).\n\
                     Metrics: /metrics (OpenMetrics text)\n";

/// Options of `hmn serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0: any free port). Addresses other than loopback need
    /// --allow-remote.
    #[arg(long, default_value = "127.0.0.1:10466", value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// Scrapes within this long of the last measurement are answered from it (e.g. 1s, 500ms):
    /// however many scrapers there are, the GPUs are measured at most once per interval.
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = args::duration)]
    pub min_interval: Duration,
    /// How often the nvidia-smi fallback is probed while NVML answers (its up series; it is
    /// probed at start too, and at each measurement NVML does not answer): measurements leave
    /// it alone, as a run of it costs tens of milliseconds to seconds.
    #[arg(long, default_value = "5m", value_name = "DURATION", value_parser = args::duration)]
    pub fallback_probe_interval: Duration,
    /// Allow a --listen address that is not loopback. The metrics name the GPUs and the
    /// processes using them (pid and name): anyone who can reach the address can read them.
    #[arg(long)]
    pub allow_remote: bool,
    /// The most per-process series a scrape carries, the largest holders first (0: none);
    /// how many were left out is `hypomnesis_gpu_process_series_dropped`.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub max_process_series: usize,
    /// The most allocation series (`gpu_allocation_info`: a GPU and a container the kubelet
    /// allocated it to) a scrape carries (0: none); how many were left out is
    /// `hypomnesis_gpu_allocation_series_dropped`.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub max_allocation_series: usize,
    /// Do not serve: ask the server on --listen (0.0.0.0: loopback) for `/` and exit 0 if it
    /// answers, 1 if not (a health check for images without an HTTP client).
    #[arg(long)]
    pub check: bool,
    #[command(flatten)]
    pub roots: RootArgs,
    /// The kubelet's pod-resources socket, to say which pod each GPU is allocated to (default:
    /// <rootfs>/var/lib/kubelet/pod-resources/kubelet.sock, when it exists).
    #[arg(long, value_name = "PATH")]
    pub pod_resources_socket: Option<std::path::PathBuf>,
    /// Do not look for ghosts (`hypomnesis_gpu_ghost_bytes` absent): no process's `stat` read
    /// for them, no scan of descriptors when a GPU holds memory no process accounts for.
    #[arg(long)]
    pub no_ghosts: bool,
    /// A process holding memory is an idle ghost when the driver's activity samples, followed
    /// from scrape to scrape, show no engine at work for it for this long.
    #[arg(long, default_value = "10m", value_name = "DURATION", value_parser = args::duration)]
    pub ghost_idle_after: Duration,
}

/// A loopback address (IPv4-mapped IPv6 ones included).
fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

pub fn run(args: &ServeArgs, err: &mut impl Write) -> io::Result<Outcome> {
    if args.check {
        return check::run(args.listen, err);
    }
    if !is_loopback(args.listen.ip()) {
        if !args.allow_remote {
            writeln!(
                err,
                "hmn: refusing to serve on {}: it is not a loopback address, and the metrics name \
                 the GPUs and the processes using them. Pass --allow-remote to serve there anyway.",
                args.listen
            )?;
            return Ok(Outcome::Code(2));
        }
        writeln!(
            err,
            "hmn: warning: serving on {}, not a loopback address (--allow-remote): anyone who can \
             reach it can read the GPU and process metrics; restrict access with a firewall or \
             network policy.",
            args.listen
        )?;
    }
    crate::heap::one_arena();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(4)
        .thread_name("hmn-serve")
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            writeln!(err, "hmn: cannot start the server: {e}")?;
            return Ok(Outcome::Code(1));
        }
    };
    let outcome = runtime.block_on(serve(args, err));
    // A measurement stuck in a driver call must not hold the exit up.
    runtime.shutdown_timeout(Duration::from_secs(1));
    outcome
}

async fn serve(args: &ServeArgs, err: &mut impl Write) -> io::Result<Outcome> {
    // Watch for signals before saying we listen: a stop sent right after must stop us cleanly.
    let stop = match stop_signal() {
        Ok(s) => s,
        Err(e) => {
            writeln!(err, "hmn: cannot watch for stop signals: {e}")?;
            return Ok(Outcome::Code(1));
        }
    };
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(l) => l,
        Err(e) => {
            writeln!(err, "hmn: cannot listen on {}: {e}", args.listen)?;
            return Ok(Outcome::Code(1));
        }
    };
    let addr = listener.local_addr()?;
    allocation::configure(args.pod_resources_socket.as_deref());
    measure::look_for_ghosts(
        (!args.no_ghosts)
            .then(|| hypomnesis::GhostOptions::default().idle_after(args.ghost_idle_after)),
    );
    if let Err(e) = probe::start(args.fallback_probe_interval) {
        writeln!(
            err,
            "hmn: cannot start probing the nvidia-smi fallback: {e}"
        )?;
        return Ok(Outcome::Code(1));
    }
    let app = router(Exporter::new(
        args.min_interval,
        Some(args.max_process_series),
        Some(args.max_allocation_series),
    ));
    writeln!(err, "hmn: serving metrics on http://{addr}/metrics")?;
    err.flush()?;
    let (signal, all_closed) =
        http::serve(listener, app, http::Limits::DEFAULT, stop, SHUTDOWN_GRACE).await;
    if all_closed {
        writeln!(err, "hmn: {signal}: stopped")?;
    } else {
        writeln!(
            err,
            "hmn: {signal}: stopped (connections still open after {}s were closed)",
            SHUTDOWN_GRACE.as_secs()
        )?;
    }
    Ok(Outcome::stopped_by(signal_number(signal)))
}

/// The number of a stop signal named by [`stop_signal`] (Windows' console events as the
/// signals they stand for: Ctrl-C and Ctrl-Break as SIGINT, closing and shutdown as SIGTERM).
fn signal_number(name: &str) -> i32 {
    match name {
        "SIGINT" | "Ctrl-C" | "Ctrl-Break" => 2,
        _ => 15,
    }
}

/// Resolves with the name of the first stop signal (SIGTERM or SIGINT; on Windows, Ctrl-C,
/// Ctrl-Break, console close or shutdown). The handlers are installed when this returns.
#[cfg(unix)]
fn stop_signal() -> io::Result<impl Future<Output = &'static str>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        }
    })
}

#[cfg(windows)]
fn stop_signal() -> io::Result<impl Future<Output = &'static str>> {
    use tokio::signal::windows;
    let mut c = windows::ctrl_c()?;
    let mut brk = windows::ctrl_break()?;
    let mut close = windows::ctrl_close()?;
    let mut shutdown = windows::ctrl_shutdown()?;
    Ok(async move {
        tokio::select! {
            _ = c.recv() => "Ctrl-C",
            _ = brk.recv() => "Ctrl-Break",
            _ = close.recv() => "console closed",
            _ = shutdown.recv() => "system shutdown",
        }
    })
}

#[cfg(not(any(unix, windows)))]
#[allow(clippy::unnecessary_wraps)] // the same signature as on unix and Windows
fn stop_signal() -> io::Result<impl Future<Output = &'static str>> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    })
}

/// The routes: `/metrics`, a pointer to it at `/`, 404 elsewhere.
fn router(exporter: Arc<Exporter>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/", get(|| async { INDEX }))
        .fallback(|| async {
            (
                StatusCode::NOT_FOUND,
                "not found; metrics are at /metrics\n",
            )
        })
        .with_state(exporter)
}

/// Whether a request asks for the Prometheus text format rather than `OpenMetrics`, weighing
/// the `Accept` media ranges by their q-values as Prometheus's client libraries do: each format
/// takes the q of its own type, else of `text/*` or `application/*`, else of `*/*` (0 when
/// none names it; q=0 refuses it). The one with the higher q wins; `OpenMetrics` on a tie, and
/// with no `Accept` at all.
fn wants_classic_text(headers: &HeaderMap) -> bool {
    let (mut openmetrics, mut text) = (None::<f32>, None::<f32>);
    let (mut application_any, mut text_any, mut any) = (None::<f32>, None::<f32>, None::<f32>);
    let mut asked = false;
    for value in headers.get_all(header::ACCEPT) {
        asked = true;
        let value = String::from_utf8_lossy(value.as_bytes()).to_ascii_lowercase();
        for item in value.split(',') {
            let mut parts = item.split(';');
            let range = parts.next().unwrap_or_default().trim();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .map_or(1.0, |q| q.clamp(0.0, 1.0));
            let slot = match range {
                "application/openmetrics-text" => &mut openmetrics,
                "text/plain" => &mut text,
                "application/*" => &mut application_any,
                "text/*" => &mut text_any,
                "*/*" => &mut any,
                _ => continue,
            };
            // A type named twice (two versions) counts with its best q.
            *slot = Some(slot.map_or(q, |old| old.max(q)));
        }
    }
    if !asked {
        return false;
    }
    let openmetrics = openmetrics.or(application_any).or(any).unwrap_or(0.0);
    let text = text.or(text_any).or(any).unwrap_or(0.0);
    text > openmetrics
}

/// Whether a request's `Accept-Encoding` takes gzip (`gzip` or `*`, with a q-value above 0).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    let mut gzip = None;
    let mut any = None;
    for value in headers.get_all(header::ACCEPT_ENCODING) {
        let value = String::from_utf8_lossy(value.as_bytes()).to_ascii_lowercase();
        for item in value.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or_default().trim();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            match coding {
                "gzip" | "x-gzip" => gzip = Some(q > 0.0),
                "*" => any = Some(q > 0.0),
                _ => {}
            }
        }
    }
    gzip.or(any).unwrap_or(false)
}

/// `text` gzipped at the fast level (a scrape's latency matters more than the last bytes).
fn gzip(text: &str) -> io::Result<Vec<u8>> {
    use flate2::{Compression, write::GzEncoder};
    let mut encoder = GzEncoder::new(Vec::with_capacity(text.len() / 8), Compression::fast());
    encoder.write_all(text.as_bytes())?;
    encoder.finish()
}

async fn metrics(State(exporter): State<Arc<Exporter>>, headers: HeaderMap) -> Response {
    let body = exporter.current().await;
    let (content_type, text) = if wants_classic_text(&headers) {
        (CLASSIC_TEXT, exposition::classic_text(&body))
    } else {
        (OPENMETRICS, body)
    };
    let vary = (
        header::VARY,
        HeaderValue::from_static("accept, accept-encoding"),
    );
    let content_type = (header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if accepts_gzip(&headers) {
        // Off the async workers: a large body takes milliseconds to compress.
        let packed = tokio::task::spawn_blocking(move || {
            let packed = gzip(&text);
            (text, packed)
        })
        .await;
        match packed {
            Ok((_, Ok(packed))) => {
                let encoding = (header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                return ([content_type, encoding, vary], packed).into_response();
            }
            // Compressing into memory does not fail; were it to, the text goes uncompressed.
            Ok((text, Err(_))) => return ([content_type, vary], text).into_response(),
            Err(e) => {
                let says = format!("cannot compress the metrics: {e}\n");
                return (StatusCode::INTERNAL_SERVER_ERROR, says).into_response();
            }
        }
    }
    ([content_type, vary], text).into_response()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Wrap {
        #[command(flatten)]
        args: ServeArgs,
    }

    #[test]
    fn defaults_and_durations() {
        let w = Wrap::try_parse_from(["serve"]).unwrap();
        assert_eq!(w.args.listen, "127.0.0.1:10466".parse().unwrap());
        assert_eq!(w.args.min_interval, Duration::from_secs(1));
        assert_eq!(w.args.fallback_probe_interval, Duration::from_secs(300));
        assert!(!w.args.allow_remote);
        let w = Wrap::try_parse_from([
            "serve",
            "--listen",
            "[::1]:0",
            "--min-interval",
            "250ms",
            "--allow-remote",
        ])
        .unwrap();
        assert_eq!(w.args.min_interval, Duration::from_millis(250));
        assert!(w.args.allow_remote);
        assert!(Wrap::try_parse_from(["serve", "--min-interval", "soon"]).is_err());
        let w = Wrap::try_parse_from(["serve", "--fallback-probe-interval", "30s"]).unwrap();
        assert_eq!(w.args.fallback_probe_interval, Duration::from_secs(30));
        assert!(Wrap::try_parse_from(["serve", "--fallback-probe-interval", "0s"]).is_err());
        assert!(Wrap::try_parse_from(["serve", "--fallback-probe-interval", "often"]).is_err());
        assert!(Wrap::try_parse_from(["serve", "--listen", "localhost"]).is_err());
    }

    #[test]
    fn content_negotiation() {
        let accept = |values: &[&str]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append(header::ACCEPT, HeaderValue::from_str(v).unwrap());
            }
            wants_classic_text(&h)
        };
        assert!(!accept(&[]));
        assert!(!accept(&["*/*"]));
        // What Prometheus 2.x sends.
        assert!(!accept(&[
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        ]));
        assert!(accept(&["text/plain; version=0.0.4"]));
        assert!(accept(&["Text/Plain"]));
        assert!(!accept(&["text/plain", "application/openmetrics-text"]));
        // q-values decide, as in Prometheus's client libraries.
        assert!(accept(&[
            "application/openmetrics-text;q=0,text/plain;version=0.0.4"
        ]));
        assert!(accept(&[
            "application/openmetrics-text;version=1.0.0;q=0.2,text/plain;q=0.9"
        ]));
        assert!(!accept(&[
            "text/plain;q=0.5,application/openmetrics-text;q=0.6"
        ]));
        assert!(accept(&["text/*;q=0.8,*/*;q=0.1"]));
        assert!(accept(&["application/openmetrics-text;q=0", "*/*"]));
        assert!(!accept(&["text/plain;q=0,*/*;q=0.5"]));
        assert!(!accept(&["image/png"]), "nothing we make: the default");
    }

    #[test]
    fn gzip_negotiation() {
        let gz = |values: &[&str]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append(header::ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
            }
            accepts_gzip(&h)
        };
        assert!(!gz(&[]));
        assert!(gz(&["gzip"]));
        assert!(gz(&["GZIP"]));
        assert!(gz(&["x-gzip"]));
        assert!(gz(&["deflate, gzip;q=0.5"]));
        assert!(gz(&["br", "gzip"]));
        assert!(gz(&["*"]));
        assert!(!gz(&["gzip;q=0"]));
        assert!(!gz(&["gzip; q=0.0"]));
        // An explicit refusal of gzip wins over a wildcard.
        assert!(!gz(&["gzip;q=0, *"]));
        assert!(gz(&["*;q=0, gzip"]));
        assert!(!gz(&["*;q=0"]));
        assert!(!gz(&["identity", "br"]));
        // A q-value that does not parse counts as the default, 1.
        assert!(gz(&["gzip;q=high"]));
    }

    #[test]
    fn gzip_round_trip() {
        use std::io::Read as _;
        let text = "hypomnesis_gpu_devices 8\n".repeat(1000);
        let packed = gzip(&text).unwrap();
        assert!(packed.len() < text.len() / 20, "{}", packed.len());
        let mut back = String::new();
        flate2::read::GzDecoder::new(packed.as_slice())
            .read_to_string(&mut back)
            .unwrap();
        assert_eq!(back, text);
    }

    #[test]
    fn loopback_addresses() {
        for ip in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"] {
            assert!(is_loopback(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["0.0.0.0", "::", "10.0.0.1", "::ffff:10.0.0.1"] {
            assert!(!is_loopback(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn remote_listen_is_refused_without_the_flag() {
        let w = Wrap::try_parse_from(["serve", "--listen", "0.0.0.0:0"]).unwrap();
        let mut err = Vec::new();
        assert_eq!(run(&w.args, &mut err).unwrap(), Outcome::Code(2));
        let err = String::from_utf8(err).unwrap();
        assert!(err.contains("--allow-remote"), "{err}");
    }

    #[tokio::test]
    async fn scrapes_within_the_interval_share_one_measurement() {
        let exporter = Exporter::new(Duration::from_secs(3600), None, None);
        let scrapes: Vec<_> = (0..16)
            .map(|_| {
                let e = Arc::clone(&exporter);
                tokio::spawn(async move { e.current().await })
            })
            .collect();
        let mut bodies = Vec::new();
        for s in scrapes {
            bodies.push(s.await.unwrap());
        }
        assert!(bodies.windows(2).all(|w| w[0] == w[1]));
        let text = &bodies[0];
        assert!(
            text.contains("\nhypomnesis_measurements_total 1\n"),
            "{text}"
        );

        let quick = Exporter::new(Duration::from_millis(1), None, None);
        quick.current().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        let text = quick.current().await;
        assert!(
            text.contains("\nhypomnesis_measurements_total 2\n"),
            "{text}"
        );
    }
}
