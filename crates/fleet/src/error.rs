//! What went wrong asking Prometheus, with the query that caused it.

use std::fmt;

/// What went wrong, with the query that caused it where there was one. Never holds a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The options themselves: a bad URL, a secret file that cannot be read, a bad CA file.
    Setup(String),
    /// The server could not be reached or did not answer in time.
    Transport {
        /// The query.
        query: String,
        /// What the transport said.
        why: String,
    },
    /// The server answered with an HTTP status other than 200, and no Prometheus error.
    Status {
        /// The query.
        query: String,
        /// The HTTP status.
        status: u16,
        /// The start of the body, as it may be shown.
        excerpt: String,
    },
    /// Prometheus answered with an error.
    Prometheus {
        /// The query.
        query: String,
        /// Its `errorType`.
        kind: String,
        /// Its `error`.
        message: String,
    },
    /// The answer could not be read: too large, not JSON, not the expected shape.
    Answer {
        /// The query.
        query: String,
        /// What is wrong with it.
        why: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Setup(why) => f.write_str(why),
            Self::Transport { query, why } => {
                write!(f, "Prometheus did not answer `{query}`: {why}")
            }
            Self::Status {
                query,
                status,
                excerpt,
            } => {
                write!(f, "Prometheus answered `{query}` with HTTP {status}")?;
                if !excerpt.is_empty() {
                    write!(f, ": {excerpt}")?;
                }
                Ok(())
            }
            Self::Prometheus {
                query,
                kind,
                message,
            } => write!(f, "Prometheus refused `{query}` ({kind}): {message}"),
            Self::Answer { query, why } => {
                write!(f, "Prometheus's answer to `{query}` cannot be read: {why}")
            }
        }
    }
}

impl std::error::Error for Error {}
