//! How `hmn` reaches a Prometheus server (`hmn fits --prometheus`, `hmn top --prometheus`):
//! the client's options on the command line, never a secret there (files hold them).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use hypomnesis_fleet::{Client, Options};

use crate::args;

/// How to reach the Prometheus server that `--prometheus` names.
// The fields are named as their flags are.
#[allow(clippy::struct_field_names)]
#[derive(Debug, Clone, Args)]
pub struct PrometheusArgs {
    /// A file holding the bearer token to send to Prometheus.
    #[arg(long, value_name = "FILE", requires = "prometheus")]
    pub prometheus_token_file: Option<PathBuf>,
    /// The basic-auth user for Prometheus (the password from --prometheus-password-file).
    #[arg(long, value_name = "USER", requires = "prometheus")]
    pub prometheus_user: Option<String>,
    /// A file holding the basic-auth password.
    #[arg(long, value_name = "FILE", requires = "prometheus_user")]
    pub prometheus_password_file: Option<PathBuf>,
    /// A PEM file of the CA certificates to trust for an https:// Prometheus.
    #[arg(long, value_name = "FILE", requires = "prometheus")]
    pub prometheus_ca_file: Option<PathBuf>,
    /// How long one query may take.
    #[arg(long, value_parser = args::duration, value_name = "DURATION", default_value = "10s",
          requires = "prometheus")]
    pub prometheus_timeout: Duration,
}

impl PrometheusArgs {
    /// The client for the server at `url`, or why not.
    pub fn client(&self, url: &str) -> Result<Client, String> {
        let options = Options {
            timeout: self.prometheus_timeout,
            bearer_token_file: self.prometheus_token_file.clone(),
            basic_user: self.prometheus_user.clone(),
            basic_password_file: self.prometheus_password_file.clone(),
            ca_file: self.prometheus_ca_file.clone(),
            ..Options::default()
        };
        Client::new(url, &options).map_err(|e| e.to_string())
    }
}
