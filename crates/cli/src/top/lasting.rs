//! What `hmn top` reads of a process once, not at every refresh: the library's
//! [`Identities`] keeps each listed process's owner, command line and container for its
//! lifetime (the owner and command line read again every [`Identities::RELOOK`] refreshes: a
//! process may retitle itself or change its user), and reads its RSS and CPU time at every
//! refresh through the files it keeps open. A refresh gives each process's [`Identity`], its
//! lasting parts shared with what is kept and with the rows made of them (a refresh copies no
//! string: a count is raised); a process with no command line (it cleared its argv) shows and
//! matches its name, whole ([`Identity::shown`]).

use std::collections::BTreeMap;

use hypomnesis::sampling::{Identities, Identity, IdentityParts};

/// The processes the view has seen, as the library keeps them.
#[derive(Debug, Default)]
pub struct Lasting {
    identities: Identities,
}

impl Lasting {
    /// Who the processes are, as kept (the look for ghosts reads their `stat` through the
    /// files kept for them).
    pub fn identities(&mut self) -> &mut Identities {
        &mut self.identities
    }

    /// The contexts of `wanted` (listed pid → pid to read): fresh RSS and CPU time, the lasting
    /// parts as kept when they are, read now when not (or when `containers` is asked and they
    /// were kept without). Processes not in `listed` are forgotten.
    pub fn read(
        &mut self,
        wanted: &BTreeMap<u32, u32>,
        containers: bool,
        listed: impl Fn(u32) -> bool,
    ) -> BTreeMap<u32, Identity> {
        let mut parts = IdentityParts::NONE;
        (parts.container, parts.changing) = (containers, true);
        self.identities.read(wanted, parts, listed)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The view's form: RSS and CPU time at every refresh, the command line kept, a process
    /// forgotten once no longer listed (the keeping itself is the library's, tested there).
    #[test]
    fn a_refresh_gives_the_kept_parts_and_fresh_figures() {
        let me = std::process::id();
        let mut l = Lasting::default();
        let wanted: BTreeMap<u32, u32> = [(me, me)].into_iter().collect();
        let first = l.read(&wanted, false, |_| true);
        let ctx = &first[&me];
        assert!(ctx.command.is_some() && ctx.rss_bytes.is_some() && ctx.cpu_time.is_some());
        let again = l.read(&wanted, false, |_| true);
        assert!(std::sync::Arc::ptr_eq(
            again[&me].command.as_ref().unwrap(),
            first[&me].command.as_ref().unwrap()
        ));
        l.read(&BTreeMap::new(), false, |_| false);
        assert!(l.identities.is_empty());
    }
}
