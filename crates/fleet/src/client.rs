//! A client of Prometheus's HTTP API (`/api/v1/query`): one kept connection pool, a timeout on
//! every query, HTTPS through rustls on Linux and the system's TLS elsewhere (the webpki roots,
//! or a CA file's), proxies from the
//! environment (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`), a bearer token or a basic
//! password read from a file, and answers bounded in bytes and series. No secret is ever in an
//! error, and a URL that carries credentials is refused (they would show in `ps` and in logs).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::answer::{self, Answer};
pub use crate::error::Error;

/// The TLS of HTTPS: rustls on Linux, the system's elsewhere (see Cargo.toml).
#[cfg(target_os = "linux")]
const TLS: ureq::tls::TlsProvider = ureq::tls::TlsProvider::Rustls;
#[cfg(not(target_os = "linux"))]
const TLS: ureq::tls::TlsProvider = ureq::tls::TlsProvider::NativeTls;

/// How the client reaches the server.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long one query may take, connection included.
    pub timeout: Duration,
    /// A file holding the bearer token (its surrounding white space dropped).
    pub bearer_token_file: Option<PathBuf>,
    /// The basic-auth user, with the password read from `basic_password_file`.
    pub basic_user: Option<String>,
    /// A file holding the basic-auth password (its trailing newline dropped).
    pub basic_password_file: Option<PathBuf>,
    /// A PEM file of the certificates to trust for HTTPS instead of the webpki roots.
    pub ca_file: Option<PathBuf>,
    /// The most bytes of one answer read (a larger one is an error, not a partial answer).
    pub max_answer_bytes: u64,
    /// The most series one answer may hold.
    pub max_series: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            bearer_token_file: None,
            basic_user: None,
            basic_password_file: None,
            ca_file: None,
            max_answer_bytes: 256 << 20,
            max_series: 1_000_000,
        }
    }
}

/// A Prometheus server's HTTP API.
pub struct Client {
    base: String,
    agent: ureq::Agent,
    authorization: Option<String>,
    max_answer_bytes: u64,
    max_series: usize,
    queries: AtomicUsize,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The authorization header is a secret: never shown.
        f.debug_struct("Client")
            .field("base", &self.base)
            .field("queries", &self.queries())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client of the server at `url` (`http://host:9090`, `https://…/prometheus`).
    ///
    /// # Errors
    ///
    /// [`Error::Setup`]: a URL that is not `http`/`https` or carries credentials, a secret or
    /// CA file that cannot be read, basic auth with no password file.
    pub fn new(url: &str, options: &Options) -> Result<Self, Error> {
        let base = base_url(url)?;
        let mut tls = ureq::tls::TlsConfig::builder().provider(TLS);
        if let Some(ca) = &options.ca_file {
            tls = tls.root_certs(ureq::tls::RootCerts::from(ca_certificates(ca)?));
        }
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(options.timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .tls_config(tls.build());
        let authorization = authorization(options)?;
        Ok(Self {
            base,
            agent: ureq::Agent::new_with_config(config.build()),
            authorization,
            max_answer_bytes: options.max_answer_bytes,
            max_series: options.max_series,
            queries: AtomicUsize::new(0),
        })
    }

    /// The server's address, as given (without a trailing `/`).
    #[must_use]
    pub fn base(&self) -> &str {
        &self.base
    }

    /// How many queries this client has sent.
    #[must_use]
    pub fn queries(&self) -> usize {
        self.queries.load(Ordering::Relaxed)
    }

    /// An instant query `promql` evaluated at `at` (Unix seconds), its vector of series.
    ///
    /// # Errors
    ///
    /// [`Error::Transport`], [`Error::Status`], [`Error::Prometheus`] or [`Error::Answer`],
    /// each naming the query.
    pub fn query(&self, promql: &str, at: f64) -> Result<Answer, Error> {
        self.queries.fetch_add(1, Ordering::Relaxed);
        let url = format!("{}/api/v1/query", self.base);
        let mut request = self.agent.post(&url);
        if let Some(a) = &self.authorization {
            request = request.header("Authorization", a);
        }
        let time = format!("{at:.3}");
        let sent = request.send_form([("query", promql), ("time", time.as_str())]);
        let mut response = sent.map_err(|e| Error::Transport {
            query: promql.to_string(),
            why: e.to_string(),
        })?;
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .with_config()
            .limit(self.max_answer_bytes)
            .read_to_string()
            .map_err(|e| Error::Answer {
                query: promql.to_string(),
                why: match e {
                    ureq::Error::BodyExceedsLimit(n) => {
                        format!("it is larger than {n} bytes (the bound on one answer)")
                    }
                    other => other.to_string(),
                },
            })?;
        answer::parse(promql, status, &body, self.max_series)
    }
}

/// `url` without a trailing `/`, checked.
fn base_url(url: &str) -> Result<String, Error> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| {
            Error::Setup(format!(
                "the Prometheus URL must start with http:// or https://, not `{}`",
                answer::shown(url)
            ))
        })?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(Error::Setup(
            "the Prometheus URL carries credentials, which would show in `ps` and in logs: give \
             --prometheus-user with --prometheus-password-file, or --prometheus-token-file"
                .into(),
        ));
    }
    if authority.is_empty() {
        return Err(Error::Setup("the Prometheus URL names no host".into()));
    }
    if rest.contains(['?', '#']) {
        return Err(Error::Setup(
            "the Prometheus URL must not carry a query or a fragment".into(),
        ));
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// The `Authorization` header the options ask for, read from its file.
fn authorization(options: &Options) -> Result<Option<String>, Error> {
    let read = |path: &Path, what: &str| -> Result<String, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::Setup(format!(
                "cannot read the {what} file {}: {e}",
                answer::shown(&path.display().to_string())
            ))
        })?;
        Ok(text.trim_end_matches(['\r', '\n']).to_string())
    };
    match (
        &options.bearer_token_file,
        &options.basic_user,
        &options.basic_password_file,
    ) {
        (Some(_), Some(_), _) => Err(Error::Setup(
            "give a bearer token or a basic-auth user, not both".into(),
        )),
        (Some(path), None, _) => {
            let token = read(path, "bearer token")?.trim().to_string();
            if token.is_empty() || token.chars().any(|c| c.is_control() || c == ' ') {
                return Err(Error::Setup(format!(
                    "the bearer token file {} holds no token (or one with spaces or control \
                     characters)",
                    answer::shown(&path.display().to_string())
                )));
            }
            Ok(Some(format!("Bearer {token}")))
        }
        (None, Some(user), Some(path)) => {
            if user.contains(':') || user.chars().any(char::is_control) {
                return Err(Error::Setup(
                    "a basic-auth user name may not hold `:` or control characters".into(),
                ));
            }
            let password = read(path, "password")?;
            Ok(Some(format!(
                "Basic {}",
                base64(format!("{user}:{password}").as_bytes())
            )))
        }
        (None, Some(_), None) => Err(Error::Setup(
            "a basic-auth user needs --prometheus-password-file (a password is never given on \
             the command line)"
                .into(),
        )),
        (None, None, Some(_)) => Err(Error::Setup(
            "--prometheus-password-file needs --prometheus-user".into(),
        )),
        (None, None, None) => Ok(None),
    }
}

/// The certificates of the PEM file at `path`.
fn ca_certificates(path: &Path) -> Result<Vec<ureq::tls::Certificate<'static>>, Error> {
    let shown = answer::shown(&path.display().to_string()).into_owned();
    let pem = std::fs::read(path)
        .map_err(|e| Error::Setup(format!("cannot read the CA file {shown}: {e}")))?;
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => certs.push(c),
            Ok(_) => {}
            Err(e) => {
                return Err(Error::Setup(format!("the CA file {shown} is not PEM: {e}")));
            }
        }
    }
    if certs.is_empty() {
        return Err(Error::Setup(format!(
            "the CA file {shown} holds no certificate"
        )));
    }
    Ok(certs)
}

/// Standard base64 with padding (RFC 4648), for a basic-auth header.
fn base64(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                let index = usize::try_from((n >> shift) & 63).unwrap_or(0);
                out.push(char::from(TABLE.get(index).copied().unwrap_or(b'=')));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_rfc_4648() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
            ("ops:s3cret", "b3BzOnMzY3JldA=="),
        ] {
            assert_eq!(base64(plain.as_bytes()), coded, "{plain}");
        }
    }

    #[test]
    fn urls_with_credentials_or_odd_schemes_are_refused() {
        assert_eq!(
            base_url("http://prom:9090/").unwrap(),
            "http://prom:9090".to_string()
        );
        assert_eq!(
            base_url("https://o.example/prometheus").unwrap(),
            "https://o.example/prometheus"
        );
        let e = base_url("http://ops:s3cret@prom:9090")
            .unwrap_err()
            .to_string();
        assert!(e.contains("credentials") && !e.contains("s3cret"), "{e}");
        assert!(base_url("ftp://prom").is_err());
        assert!(base_url("http://").is_err());
        assert!(base_url("http://prom:9090/?x=1").is_err());
    }

    #[test]
    fn secrets_come_from_files_and_never_show() {
        let dir = std::env::temp_dir().join(format!("hmn-fleet-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let token = dir.join("token");
        std::fs::write(&token, "t0ken-value\n").unwrap();
        let password = dir.join("password");
        std::fs::write(&password, "s3cret\n").unwrap();
        let mut o = Options {
            bearer_token_file: Some(token.clone()),
            ..Options::default()
        };
        assert_eq!(
            authorization(&o).unwrap().as_deref(),
            Some("Bearer t0ken-value")
        );
        let c = Client::new("http://127.0.0.1:9/", &o).unwrap();
        let shown = format!("{c:?}");
        assert!(
            shown.contains("http://127.0.0.1:9") && !shown.contains("t0ken"),
            "{shown}"
        );
        assert_eq!(c.base(), "http://127.0.0.1:9");
        o.bearer_token_file = None;
        o.basic_user = Some("ops".into());
        o.basic_password_file = Some(password);
        assert_eq!(
            authorization(&o).unwrap().as_deref(),
            Some("Basic b3BzOnMzY3JldA==")
        );
        o.basic_password_file = None;
        assert!(authorization(&o).is_err());
        o.basic_password_file = Some(dir.join("missing"));
        let e = authorization(&o).unwrap_err().to_string();
        assert!(e.contains("missing"), "{e}");
        std::fs::write(&token, "   \n").unwrap();
        let o = Options {
            bearer_token_file: Some(token),
            ..Options::default()
        };
        assert!(authorization(&o).is_err(), "an empty token");
        for bad in ["two words\n", "bell\u{7}\n"] {
            std::fs::write(o.bearer_token_file.as_ref().unwrap(), bad).unwrap();
            assert!(authorization(&o).is_err(), "{bad:?}");
        }
        let o = Options {
            basic_user: Some("a:b".into()),
            basic_password_file: Some(dir.join("password")),
            ..Options::default()
        };
        assert!(authorization(&o).is_err(), "a user with a colon");
        let o = Options {
            basic_user: Some("a\u{1b}b".into()),
            basic_password_file: Some(dir.join("password")),
            ..Options::default()
        };
        assert!(
            authorization(&o).is_err(),
            "a user with a control character"
        );
        let o = Options {
            ca_file: Some(dir.join("password")),
            ..Options::default()
        };
        let e = Client::new("https://prom", &o).unwrap_err().to_string();
        assert!(e.contains("no certificate") || e.contains("not PEM"), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
