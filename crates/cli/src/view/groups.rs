//! `hmn ps --group-by`: each GPU's memory per owner, container, pod or namespace, added up over
//! the processes, with what no listed process accounts for as a group of its own.

use std::collections::BTreeMap;
use std::io::{self, Write};

use clap::ValueEnum;
use hypomnesis::{Container, GpuVendor};
use serde::Serialize;

use super::printable::printable;
use super::ps::{Hidden, PsRow};
use super::{MAX_COLUMN, cut, fit, format_size, json};

/// What `hmn ps --group-by` adds up by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// The process's owner (its user name, else its uid).
    User,
    /// Its container (`namespace/pod/container` where the kubelet's files name it, else the
    /// container id).
    Container,
    /// Its Kubernetes pod (`namespace/pod`, else the pod UID).
    Pod,
    /// Its pod's Kubernetes namespace.
    Namespace,
    /// Its container's DRA resource claim on that GPU (`namespace/claim`), as the kubelet's
    /// pod-resources API gives it.
    Claim,
}

/// Each container's DRA claims on each GPU, by `(gpu, namespace, pod, container)`: the group
/// name of `--group-by claim` (`namespace/claim`, two claims comma-separated).
pub type Claims = BTreeMap<(u32, String, String, String), String>;

impl GroupBy {
    /// The next grouping of `hmn top`'s `G` key: none, user, pod, namespace, container, none.
    #[cfg_attr(not(feature = "top"), allow(dead_code))]
    pub fn next(group: Option<Self>) -> Option<Self> {
        match group {
            None => Some(Self::User),
            Some(Self::User) => Some(Self::Pod),
            Some(Self::Pod) => Some(Self::Namespace),
            Some(Self::Namespace) => Some(Self::Container),
            Some(Self::Container | Self::Claim) => None,
        }
    }

    /// The group column's heading.
    pub fn heading(self) -> &'static str {
        match self {
            Self::User => "USER",
            Self::Container => "CONTAINER",
            Self::Pod => "POD",
            Self::Namespace => "NAMESPACE",
            Self::Claim => "CLAIM",
        }
    }
}

/// Which group a process is in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    /// Named: a user, a container, a pod, a namespace.
    Named(String),
    /// In one, but which cannot be said (a pod whose namespace the kubelet's files do not
    /// name; a process outside this PID namespace, whose files cannot be read).
    Unknown,
    /// In none (a process in no container, or in a container of no pod).
    NoGroup,
    /// Memory no listed process accounts for.
    NotVisible,
}

/// One group's figures on one GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub device_index: u32,
    pub device_name: Option<String>,
    pub device_vendor: Option<GpuVendor>,
    pub key: Key,
    /// How many processes; `None` for memory of no listed process.
    pub processes: Option<usize>,
    pub used_bytes: u64,
}

/// Short form of a container id, as `docker ps` shows it.
fn short_id(id: &str) -> String {
    id.chars().take(12).collect()
}

/// `namespace/pod` when the kubelet's files name both, else the pod UID.
fn pod_of(c: &Container) -> Option<String> {
    match (&c.namespace, &c.pod) {
        (Some(ns), Some(pod)) => Some(format!("{ns}/{pod}")),
        _ => c.pod_uid.clone(),
    }
}

/// The group `r` is in, by `by`.
pub fn key_of(r: &PsRow, by: GroupBy) -> Key {
    let user = r
        .ctx
        .user
        .clone()
        .or_else(|| r.ctx.uid.map(|u| u.to_string()));
    key_from(
        super::unseen::reason_of(&r.entry).is_some(),
        user,
        r.ctx.container.as_ref(),
        by,
    )
}

/// The group of a process by `by`, from its owner and container; a process whose files cannot
/// be read (`outside` this PID namespace, hidden by `hidepid`, exited) has none to tell: unknown.
pub fn key_from(
    outside: bool,
    user: Option<String>,
    container: Option<&Container>,
    by: GroupBy,
) -> Key {
    if outside {
        return Key::Unknown;
    }
    let named = |v: Option<String>| v.map_or(Key::Unknown, Key::Named);
    match by {
        GroupBy::User => named(user),
        GroupBy::Container => container.map_or(Key::NoGroup, |c| {
            // `namespace/pod/container`; the container id where the name is unknown.
            let name = c.name.clone().unwrap_or_else(|| short_id(&c.id));
            Key::Named(match (&c.namespace, &c.pod) {
                (Some(ns), Some(pod)) => format!("{ns}/{pod}/{name}"),
                _ => name,
            })
        }),
        GroupBy::Pod => match container {
            Some(c) if c.pod_uid.is_some() => named(pod_of(c)),
            _ => Key::NoGroup,
        },
        GroupBy::Namespace => match container {
            Some(c) if c.pod_uid.is_some() => named(c.namespace.clone()),
            _ => Key::NoGroup,
        },
        // Claims are the kubelet's to say ([`claim_key`]); not known from the process alone.
        GroupBy::Claim => match container {
            Some(c) if c.pod_uid.is_some() => Key::Unknown,
            _ => Key::NoGroup,
        },
    }
}

/// The claim group of `r`: its container's claims on its GPU by `claims` (`None`: the kubelet
/// was not asked or did not answer), `(no claim)` for a pod's container without one there.
pub fn claim_key(r: &PsRow, claims: Option<&Claims>) -> Key {
    let c = r.ctx.container.as_ref();
    let (Some(claims), Some(c)) = (claims, c) else {
        return key_of(r, GroupBy::Claim);
    };
    if super::unseen::reason_of(&r.entry).is_some() || c.pod_uid.is_none() {
        return key_of(r, GroupBy::Claim);
    }
    let (Some(ns), Some(pod), Some(name)) = (&c.namespace, &c.pod, &c.name) else {
        return Key::Unknown;
    };
    claims
        .get(&(r.entry.device_index, ns.clone(), pod.clone(), name.clone()))
        .map_or(Key::NoGroup, |n| Key::Named(n.clone()))
}

/// Each GPU's groups, largest first, then what no listed process accounts for; `claims` names
/// the claim groups of [`GroupBy::Claim`].
pub fn groups(
    rows: &[PsRow],
    hidden: &[Hidden],
    by: GroupBy,
    claims: Option<&Claims>,
) -> Vec<Group> {
    let mut sums: BTreeMap<(u32, Key), Group> = BTreeMap::new();
    for r in rows {
        let key = if by == GroupBy::Claim {
            claim_key(r, claims)
        } else {
            key_of(r, by)
        };
        let g = sums
            .entry((r.entry.device_index, key.clone()))
            .or_insert_with(|| Group {
                device_index: r.entry.device_index,
                device_name: r.device_name.clone(),
                device_vendor: r.device_vendor,
                key,
                processes: Some(0),
                used_bytes: 0,
            });
        g.processes = g.processes.map(|n| n + 1);
        g.used_bytes = g.used_bytes.saturating_add(r.entry.used_bytes);
    }
    for h in hidden {
        sums.insert(
            (h.device_index, Key::NotVisible),
            Group {
                device_index: h.device_index,
                device_name: h.device_name.clone(),
                device_vendor: h.device_vendor,
                key: Key::NotVisible,
                processes: None,
                used_bytes: h.bytes,
            },
        );
    }
    let mut out: Vec<Group> = sums.into_values().collect();
    out.sort_by(|a, b| {
        (
            a.device_index,
            a.key == Key::NotVisible,
            std::cmp::Reverse(a.used_bytes),
            &a.key,
        )
            .cmp(&(
                b.device_index,
                b.key == Key::NotVisible,
                std::cmp::Reverse(b.used_bytes),
                &b.key,
            ))
    });
    out
}

/// How a group is shown: its name, `?`, `(no pod)`, `(not visible from here)`.
pub fn key_cell(key: &Key, by: GroupBy) -> String {
    match key {
        Key::Named(n) => printable(n).into_owned(),
        Key::Unknown => "?".to_string(),
        Key::NoGroup => match by {
            GroupBy::User => "?".to_string(),
            GroupBy::Container => "(no container)".to_string(),
            GroupBy::Pod | GroupBy::Namespace => "(no pod)".to_string(),
            GroupBy::Claim => "(no claim)".to_string(),
        },
        Key::NotVisible => "(not visible from here)".to_string(),
    }
}

/// The table: `GPU  <KEY>  PROCS  VRAM  DEVICE`.
pub fn groups_table(out: &mut impl Write, groups: &[Group], by: GroupBy) -> io::Result<()> {
    let head = ["GPU", by.heading(), "PROCS", "VRAM", "DEVICE"];
    let cells: Vec<[String; 5]> = groups
        .iter()
        .map(|g| {
            [
                g.device_index.to_string(),
                cut(&key_cell(&g.key, by), MAX_COLUMN).into_owned(),
                g.processes.map_or_else(|| "-".into(), |n| n.to_string()),
                format_size(g.used_bytes),
                g.device_name
                    .as_deref()
                    .map_or_else(|| "-".into(), |n| printable(n).into_owned()),
            ]
        })
        .collect();
    let width = |k: usize| {
        cells
            .iter()
            .map(|c| c.get(k).map_or(0, |s| s.chars().count()))
            .chain(head.get(k).map(|h| h.len()))
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..head.len()).map(width).collect();
    let line = |c: &[String]| {
        let mut s = String::new();
        for (k, cell) in c.iter().enumerate() {
            let w = widths.get(k).copied().unwrap_or(0);
            if k + 1 == c.len() {
                s.push_str(cell);
            } else {
                s.push_str(&fit(cell, w, matches!(k, 2 | 3)));
                s.push_str("  ");
            }
        }
        s
    };
    writeln!(out, "{}", line(&head.map(String::from)))?;
    for c in &cells {
        writeln!(out, "{}", line(c))?;
    }
    Ok(())
}

#[derive(Serialize)]
struct GroupJson<'a> {
    device_index: u32,
    device_name: Option<&'a str>,
    group_by: GroupBy,
    /// The group's name; `null` when it cannot be said or there is none (see `kind`).
    group: Option<&'a str>,
    /// `named`, `unknown`, `none`, `not_visible`.
    kind: &'static str,
    processes: Option<usize>,
    used_bytes: u64,
}

pub fn groups_json(out: &mut impl Write, groups: &[Group], by: GroupBy) -> io::Result<()> {
    let v: Vec<GroupJson<'_>> = groups
        .iter()
        .map(|g| GroupJson {
            device_index: g.device_index,
            device_name: g.device_name.as_deref(),
            group_by: by,
            group: match &g.key {
                Key::Named(n) => Some(n),
                _ => None,
            },
            kind: match g.key {
                Key::Named(_) => "named",
                Key::Unknown => "unknown",
                Key::NoGroup => "none",
                Key::NotVisible => "not_visible",
            },
            processes: g.processes,
            used_bytes: g.used_bytes,
        })
        .collect();
    json(out, &v)
}
