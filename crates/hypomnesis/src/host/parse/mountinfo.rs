//! `/proc/<pid>/mountinfo` (`proc(5)`): which mount a path is on, and a procfs mount's
//! options; and the credentials lines of `/proc/self/status` that decide whether `hidepid`
//! applies to a process.
//!
//! A line is `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`:
//! mount id, parent id, device, root, mount point, mount options, optional fields ended by `-`,
//! then filesystem type, source and filesystem options. Paths escape space, tab, newline and
//! backslash as octal (`\040`). A line that does not have that shape is skipped.

use crate::types::Hidepid;

/// What is taken of one mountinfo line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountLine {
    /// The mount point, unescaped.
    pub mount_point: String,
    /// The filesystem type (`proc`).
    pub fs_type: String,
    /// The filesystem's own options (after the source): where `hidepid` is.
    pub options: String,
}

/// `\ooo` octal escapes of a mountinfo path made into their bytes; any other backslash kept.
#[must_use]
pub fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        let octal = b.get(i + 1..i + 4).filter(|d| {
            d.iter().all(|x| (b'0'..=b'7').contains(x)) && d.first().is_some_and(|x| *x <= b'3')
        });
        if let (b'\\', Some(d)) = (c, octal) {
            out.push(d.iter().fold(0_u8, |v, x| v * 8 + (x - b'0')));
            i += 4;
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One mountinfo line's mount point, filesystem type and options; `None` for a line without
/// the fields or the `-` separator.
#[must_use]
pub fn parse_line(line: &str) -> Option<MountLine> {
    // Fields are separated by one space; a path's own spaces, tabs and newlines are escaped,
    // but any other byte (a form feed, a carriage return) is printed as it is.
    let mut fields = line.split(' ').filter(|f| !f.is_empty());
    let mount_point = fields.nth(4)?;
    let _mount_options = fields.next()?;
    // Optional fields (zero or more), then `-`.
    fields.find(|f| *f == "-")?;
    let fs_type = fields.next()?;
    let _source = fields.next()?;
    let options = fields.next().unwrap_or("");
    mount_point.starts_with('/').then(|| MountLine {
        mount_point: unescape(mount_point),
        fs_type: unescape(fs_type),
        options: options.to_string(),
    })
}

/// Whether `path` is `dir` or below it, component by component (`/proc` holds `/proc/1`, not
/// `/procfs`).
fn contains(dir: &str, path: &str) -> bool {
    let Some(rest) = path.strip_prefix(dir) else {
        return false;
    };
    dir.ends_with('/') || rest.is_empty() || rest.starts_with('/')
}

/// The mount `path` (absolute, symbolic links resolved) is on: the deepest mount point that
/// contains it, the last listed of equals (a later mount on the same point covers an earlier
/// one). `None` when no line of `mountinfo` contains it.
#[must_use]
pub fn mount_of(mountinfo: &str, path: &str) -> Option<MountLine> {
    let mut best: Option<MountLine> = None;
    for m in mountinfo.lines().filter_map(parse_line) {
        if contains(&m.mount_point, path)
            && best
                .as_ref()
                .is_none_or(|b| m.mount_point.len() >= b.mount_point.len())
        {
            best = Some(m);
        }
    }
    best
}

/// A procfs mount's options: `hidepid` (`Some(Off)` when not set, `None` for a value this
/// version does not know), `gid` and `subset=pid`. The last of repeated options wins, as in
/// the kernel.
#[must_use]
pub fn procfs_options(options: &str) -> (Option<Hidepid>, Option<u32>, bool) {
    let mut hidepid = Some(Hidepid::Off);
    let mut gid = None;
    let mut subset_pid = false;
    for o in options.split(',') {
        if let Some(v) = o.strip_prefix("hidepid=") {
            hidepid = Hidepid::parse(v);
        } else if let Some(v) = o.strip_prefix("gid=") {
            gid = v.parse().ok();
        } else if let Some(v) = o.strip_prefix("subset=") {
            subset_pid = v == "pid";
        }
    }
    (hidepid, gid, subset_pid)
}

/// The credentials of a process that `hidepid` looks at, from its `status`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Credentials {
    /// The filesystem gid (`Gid:`'s fourth value) and the supplementary groups (`Groups:`).
    pub groups: Vec<u32>,
    /// Whether `CapEff:` has `CAP_SYS_PTRACE` (bit 19), which `hidepid` never hides from.
    pub cap_sys_ptrace: bool,
}

/// `CAP_SYS_PTRACE`, a bit of `CapEff:`.
const CAP_SYS_PTRACE: u32 = 19;

/// The credentials in a `status` file's text; `None` without a `Gid:` and a `CapEff:` line
/// that parse.
#[must_use]
pub fn credentials(status: &str) -> Option<Credentials> {
    let mut fs_gid = None;
    let mut groups = Vec::new();
    let mut caps = None;
    for line in status.lines() {
        if let Some(v) = line.strip_prefix("Gid:") {
            fs_gid = v
                .split_ascii_whitespace()
                .nth(3)
                .and_then(|g| g.parse().ok());
        } else if let Some(v) = line.strip_prefix("Groups:") {
            groups = v
                .split_ascii_whitespace()
                .filter_map(|g| g.parse().ok())
                .collect();
        } else if let Some(v) = line.strip_prefix("CapEff:") {
            caps = u64::from_str_radix(v.trim(), 16).ok();
        }
    }
    let mut all: Vec<u32> = vec![fs_gid?];
    all.append(&mut groups);
    Some(Credentials {
        groups: all,
        cap_sys_ptrace: caps? & (1 << CAP_SYS_PTRACE) != 0,
    })
}

/// Whether `hidepid` mode `mode` with exempt group `gid` (0 when the mount sets none) hides
/// other users' processes from a process with `creds`: never when it is off or the process has
/// `CAP_SYS_PTRACE`; not from a member of the group under `noaccess` and `invisible`. `None`
/// when the mode or the credentials are unknown.
#[must_use]
pub fn hides_other_users(
    mode: Option<Hidepid>,
    gid: Option<u32>,
    creds: Option<&Credentials>,
) -> Option<bool> {
    if mode == Some(Hidepid::Off) {
        return Some(false);
    }
    let creds = creds?;
    if creds.cap_sys_ptrace {
        return Some(false);
    }
    match mode? {
        Hidepid::Off => Some(false),
        Hidepid::Ptraceable => Some(true),
        Hidepid::NoAccess | Hidepid::Invisible => Some(!creds.groups.contains(&gid.unwrap_or(0))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
31 23 0:28 / /sys/fs/cgroup rw,relatime shared:9 master:2 - tmpfs tmpfs rw,mode=755
40 27 0:33 / /tmp/hmn\\040proc rw,relatime - proc proc rw,hidepid=invisible,gid=27
41 27 0:34 / /tmp/p2 rw - proc proc rw,hidepid=2
42 41 0:35 / /tmp/p2 rw - proc proc rw,hidepid=noaccess,subset=pid
43 27 0:36 / /procfs rw - tmpfs tmpfs rw
";

    #[test]
    fn lines_and_escapes() {
        assert_eq!(
            parse_line(
                "40 27 0:33 / /tmp/hmn\\040proc rw,relatime - proc proc rw,hidepid=invisible"
            ),
            Some(MountLine {
                mount_point: "/tmp/hmn proc".into(),
                fs_type: "proc".into(),
                options: "rw,hidepid=invisible".into(),
            })
        );
        // Optional fields before the separator.
        assert_eq!(
            parse_line("31 23 0:28 / /sys/fs/cgroup rw shared:9 master:2 - tmpfs tmpfs rw")
                .map(|m| m.fs_type),
            Some("tmpfs".into())
        );
        // Malformed: too few fields, no separator, a relative mount point, nothing after `-`.
        assert_eq!(parse_line(""), None);
        assert_eq!(parse_line("22 27 0:21 / /proc rw proc proc rw"), None);
        assert_eq!(parse_line("22 27 0:21 / proc rw - proc proc rw"), None);
        assert_eq!(parse_line("22 27 0:21 / /proc rw -"), None);
        assert_eq!(unescape("a\\134b\\011c\\012"), "a\\b\tc\n");
        assert_eq!(unescape("trailing\\"), "trailing\\");
        assert_eq!(unescape("\\999 \\04"), "\\999 \\04");
        assert_eq!(unescape("\\400"), "\\400", "not a byte");
        // A form feed or a carriage return in a path is printed as it is.
        assert_eq!(
            parse_line("40 27 0:33 / /tmp/a\x0cb\r rw - proc proc rw").map(|m| m.mount_point),
            Some("/tmp/a\x0cb\r".into())
        );
    }

    #[test]
    fn the_deepest_and_latest_mount_holds_a_path() {
        let at = |p: &str| mount_of(HOST, p).map(|m| (m.mount_point, m.options));
        assert_eq!(at("/proc").unwrap().0, "/proc");
        assert_eq!(at("/proc/1/status").unwrap().0, "/proc");
        assert_eq!(at("/procfs").unwrap().0, "/procfs", "not /proc's");
        assert_eq!(at("/home").unwrap().0, "/");
        assert_eq!(
            at("/tmp/hmn proc").unwrap().1,
            "rw,hidepid=invisible,gid=27"
        );
        assert_eq!(
            at("/tmp/p2").unwrap().1,
            "rw,hidepid=noaccess,subset=pid",
            "the later mount on the same point"
        );
        assert_eq!(mount_of("", "/proc"), None);
        assert_eq!(mount_of("garbage\n\n", "/proc"), None);
    }

    #[test]
    fn procfs_options_by_name_and_number() {
        assert_eq!(procfs_options("rw"), (Some(Hidepid::Off), None, false));
        assert_eq!(
            procfs_options("rw,hidepid=invisible,gid=27"),
            (Some(Hidepid::Invisible), Some(27), false)
        );
        assert_eq!(
            procfs_options("rw,hidepid=1,subset=pid"),
            (Some(Hidepid::NoAccess), None, true)
        );
        assert_eq!(
            procfs_options("hidepid=4"),
            (Some(Hidepid::Ptraceable), None, false)
        );
        assert_eq!(
            procfs_options("hidepid=7,gid=x"),
            (None, None, false),
            "unknown"
        );
        assert_eq!(procfs_options("hidepid=2,hidepid=0").0, Some(Hidepid::Off));
    }

    #[test]
    fn who_hidepid_hides_from() {
        let nobody = credentials(
            "Name:\tx\nGid:\t65534\t65534\t65534\t65534\nGroups:\t\nCapEff:\t0000000000000000\n",
        )
        .unwrap();
        assert_eq!(nobody.groups, vec![65534]);
        let member = credentials("Gid:\t1\t1\t1\t100\nGroups:\t27 44\nCapEff:\t0\n").unwrap();
        assert_eq!(member.groups, vec![100, 27, 44]);
        let root = credentials("Gid:\t0\t0\t0\t0\nGroups:\nCapEff:\t000001ffffffffff\n").unwrap();
        assert!(root.cap_sys_ptrace && !member.cap_sys_ptrace);
        assert_eq!(credentials("Gid:\t0\t0\t0\t0\n"), None, "no CapEff");
        assert_eq!(credentials("CapEff:\tzz\nGid:\t0\t0\t0\t0\n"), None);

        let inv = Some(Hidepid::Invisible);
        assert_eq!(hides_other_users(inv, None, Some(&nobody)), Some(true));
        assert_eq!(hides_other_users(inv, Some(27), Some(&member)), Some(false));
        assert_eq!(hides_other_users(inv, Some(28), Some(&member)), Some(true));
        assert_eq!(hides_other_users(inv, None, Some(&root)), Some(false));
        let ptr = Some(Hidepid::Ptraceable);
        assert_eq!(hides_other_users(ptr, Some(27), Some(&member)), Some(true));
        assert_eq!(hides_other_users(ptr, None, Some(&root)), Some(false));
        assert_eq!(
            hides_other_users(Some(Hidepid::Off), None, None),
            Some(false)
        );
        assert_eq!(hides_other_users(inv, None, None), None);
        assert_eq!(hides_other_users(None, None, Some(&nobody)), None);
        // Group 0 is exempt when the mount names no group.
        let wheel = credentials("Gid:\t5\t5\t5\t5\nGroups:\t0\nCapEff:\t0\n").unwrap();
        assert_eq!(
            hides_other_users(Some(Hidepid::NoAccess), None, Some(&wheel)),
            Some(false)
        );
    }
}
