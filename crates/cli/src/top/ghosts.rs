//! Ghosts in `hmn top`: the sampling thread looks for them every [`EVERY`] at the rows its
//! refresh read (a look reads each listed process's `stat`, through the files the view keeps
//! for who each process is, and more for some; so not at every refresh), keeping
//! one [`GhostWatch`] for the session: a process in `D` at two looks is stuck, activity is
//! followed between looks. The view marks each ghost's row and lists them under the RAM line.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hypomnesis::sampling::{Frame, Identities};
use hypomnesis::{GhostOptions, GhostReport, GhostWatch};

/// How often the view looks for ghosts.
pub const EVERY: Duration = Duration::from_secs(10);

/// The session's watch and its latest look.
pub struct GhostLook {
    watch: GhostWatch,
    at: Option<Instant>,
    latest: Option<Arc<GhostReport>>,
}

impl Default for GhostLook {
    fn default() -> Self {
        Self {
            watch: GhostWatch::new(GhostOptions::default()),
            at: None,
            latest: None,
        }
    }
}

impl GhostLook {
    /// The latest look, made again from `frame` when the last is [`EVERY`] old, each listed
    /// process's `stat` read through the files `identities` keeps for the view.
    pub fn refresh(
        &mut self,
        frame: &Frame,
        identities: &mut Identities,
    ) -> Option<Arc<GhostReport>> {
        if self.at.is_some_and(|t| t.elapsed() < EVERY) {
            return self.latest.clone();
        }
        self.at = Some(Instant::now());
        let rows: Vec<_> = frame
            .devices
            .iter()
            .filter_map(|d| Some((d.info()?.clone(), d.processes()?.to_vec())))
            .collect();
        self.latest = if rows.is_empty() {
            None
        } else {
            self.watch
                .look_at_rows_with(&rows, identities)
                .ok()
                .map(Arc::new)
        };
        self.latest.clone()
    }
}
