//! Pure parsers for the RAM sources (compiled and tested on every OS).

use crate::error::clip;

/// Resident bytes from the text of `/proc/<pid>/statm`: the second field (resident pages)
/// times `page_size`.
pub fn statm_resident_bytes(text: &str, page_size: u64) -> Result<u64, String> {
    let mut fields = text.split_ascii_whitespace();
    let _size = fields.next().ok_or_else(|| "statm is empty".to_string())?;
    let resident = fields
        .next()
        .ok_or_else(|| format!("statm has no resident field: {:?}", clip(text)))?;
    let pages: u64 = resident
        .parse()
        .map_err(|_| format!("statm resident field is not a number: {:?}", clip(resident)))?;
    pages
        .checked_mul(page_size)
        .ok_or_else(|| format!("statm resident pages {pages} x page size {page_size} overflows"))
}

/// The host's RAM from the text of `/proc/meminfo`: `(MemTotal, MemAvailable)` in bytes, the
/// total required, the available `None` on kernels before 3.14, which lack it (both in kB).
pub fn meminfo(text: &str) -> Result<(u64, Option<u64>), String> {
    let field = |name: &str| -> Result<Option<u64>, String> {
        let Some(line) = text.lines().find_map(|l| l.strip_prefix(name)) else {
            return Ok(None);
        };
        let mut parts = line.split_ascii_whitespace();
        let kib: u64 = parts
            .next()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{name} value is not a number: {:?}", clip(line)))?;
        if parts.next() != Some("kB") {
            return Err(format!("{name} is not in kB: {:?}", clip(line)));
        }
        kib.checked_mul(1024)
            .map(Some)
            .ok_or_else(|| format!("{name} {kib} kB overflows when converted to bytes"))
    };
    let total = field("MemTotal:")?
        .filter(|&t| t > 0)
        .ok_or("meminfo has no (nonzero) MemTotal line")?;
    let available = field("MemAvailable:")?;
    if available.is_some_and(|a| a > total) {
        return Err(format!(
            "MemAvailable {available:?} is larger than MemTotal {total}"
        ));
    }
    Ok((total, available))
}

/// Resident bytes from the text of `/proc/<pid>/status`: the `VmRSS:` line, in kB.
pub fn status_vmrss_bytes(text: &str) -> Result<u64, String> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .ok_or_else(|| {
            "status has no VmRSS line (a kernel thread, or not a status file)".to_string()
        })?;
    let mut parts = line.split_ascii_whitespace();
    let value = parts
        .next()
        .ok_or_else(|| "VmRSS line has no value".to_string())?;
    let kib: u64 = value
        .parse()
        .map_err(|_| format!("VmRSS value is not a number: {:?}", clip(value)))?;
    match parts.next() {
        Some("kB") => {}
        other => return Err(format!("VmRSS unit is {other:?}, expected \"kB\"")),
    }
    kib.checked_mul(1024)
        .ok_or_else(|| format!("VmRSS {kib} kB overflows when converted to bytes"))
}

/// Resident and proportional bytes from the text of `/proc/<pid>/smaps_rollup` (Linux 4.14
/// and later): its `Rss:` and `Pss:` lines, in kB, as `(rss, pss)`. PSS counts each page
/// divided among the processes that map it, so summed over processes it counts a shared page
/// once. Each line must appear once, in kB, and PSS cannot exceed RSS: a file that says
/// otherwise is refused.
pub fn smaps_rollup_rss_pss(text: &str) -> Result<(u64, u64), String> {
    let field = |name: &str| -> Result<u64, String> {
        let mut lines = text.lines().filter_map(|l| l.strip_prefix(name));
        let line = lines
            .next()
            .ok_or_else(|| format!("smaps_rollup has no {name} line"))?;
        if lines.next().is_some() {
            return Err(format!("smaps_rollup has more than one {name} line"));
        }
        let mut parts = line.split_ascii_whitespace();
        let kib: u64 = parts
            .next()
            .filter(|v| v.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("smaps_rollup {name} is not a number: {:?}", clip(line)))?;
        if parts.next() != Some("kB") || parts.next().is_some() {
            return Err(format!(
                "smaps_rollup {name} is not in kB: {:?}",
                clip(line)
            ));
        }
        kib.checked_mul(1024)
            .ok_or_else(|| format!("smaps_rollup {name} {kib} kB overflows in bytes"))
    };
    let rss = field("Rss:")?;
    let pss = field("Pss:")?;
    if pss > rss {
        return Err(format!(
            "smaps_rollup Pss ({pss} bytes) is larger than its Rss ({rss} bytes)"
        ));
    }
    Ok((rss, pss))
}

/// The thread-group id (the process's pid) from the text of `/proc/<pid>/status`: its
/// `Tgid:` line; `None` when there is none or it is not a number.
#[must_use]
pub fn status_tgid(text: &str) -> Option<u32> {
    text.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The context switches of a task so far, voluntary and not, from the text of its `status`
/// (`voluntary_ctxt_switches:`, `nonvoluntary_ctxt_switches:`; a process's `status` counts its
/// leader thread's); `None` when either is missing or not a number. Unchanged between two
/// reads, the task did not run in between.
#[must_use]
pub fn status_context_switches(text: &str) -> Option<u64> {
    let value = |key: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
    };
    value("voluntary_ctxt_switches:")?.checked_add(value("nonvoluntary_ctxt_switches:")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_switches_of_a_status_file() {
        let status =
            "Name:\tpython3\nvoluntary_ctxt_switches:\t150\nnonvoluntary_ctxt_switches:\t545\n";
        assert_eq!(status_context_switches(status), Some(695));
        assert_eq!(
            status_context_switches("voluntary_ctxt_switches:\t1\n"),
            None
        );
        assert_eq!(
            status_context_switches(
                "voluntary_ctxt_switches:\t18446744073709551615\nnonvoluntary_ctxt_switches:\t1\n"
            ),
            None,
            "never wraps"
        );
    }

    #[test]
    fn tgid_of_a_status_file() {
        let status =
            "Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nPid:\t4250\n";
        assert_eq!(status_tgid(status), Some(4242));
        assert_eq!(status_tgid("Name:\tx\n"), None);
        assert_eq!(status_tgid("Tgid:\tlots\n"), None);
        assert_eq!(status_tgid("Tgid:\t-1\n"), None);
    }

    #[test]
    fn smaps_rollup() {
        let real = "55881e67c000-7ffd2be50000 ---p 00000000 00:00 0                          [rollup]\n\
                    Rss:                1740 kB\nPss:                 346 kB\n\
                    Pss_Dirty:           116 kB\nPss_Anon:            116 kB\n\
                    Pss_File:            230 kB\nShared_Clean:       1584 kB\nSwapPss:     0 kB\n";
        assert_eq!(smaps_rollup_rss_pss(real), Ok((1740 * 1024, 346 * 1024)));
        assert_eq!(smaps_rollup_rss_pss("Pss: 0 kB\nRss: 0 kB\n"), Ok((0, 0)));
        for (text, why) in [
            ("", "no Rss: line"),
            ("Rss: 10 kB\n", "no Pss: line"),
            ("Rss: 10 kB\nPss_Anon: 5 kB\n", "no Pss: line"),
            ("Rss: 10 kB\nPss: 11 kB\n", "larger"),
            ("Rss: 10 kB\nPss: 5 kB\nPss: 6 kB\n", "more than one"),
            ("Rss: 10 kB\nPss: -5 kB\n", "not a number"),
            ("Rss: 10 kB\nPss: +5 kB\n", "not a number"),
            ("Rss: ten kB\nPss: 5 kB\n", "not a number"),
            ("Rss: 10 MB\nPss: 5 kB\n", "not in kB"),
            ("Rss: 10 kB extra\nPss: 5 kB\n", "not in kB"),
            ("Rss: 18446744073709551615 kB\nPss: 5 kB\n", "overflows"),
        ] {
            let e = smaps_rollup_rss_pss(text).unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
        }
    }

    #[test]
    fn meminfo_total_and_available() {
        let text = "MemTotal:       24570768 kB\nMemFree:         1094528 kB\nMemAvailable:   18315460 kB\n";
        assert_eq!(
            meminfo(text),
            Ok((24_570_768 * 1024, Some(18_315_460 * 1024)))
        );
        let old = meminfo("MemTotal: 1000 kB\nMemFree: 10 kB\n");
        assert_eq!(old, Ok((1_024_000, None)), "kernels before 3.14");
        assert!(
            meminfo("MemFree: 10 kB\n")
                .unwrap_err()
                .contains("MemTotal")
        );
        assert!(
            meminfo("MemTotal: 0 kB\n")
                .unwrap_err()
                .contains("MemTotal")
        );
        assert!(
            meminfo("MemTotal: x kB\n")
                .unwrap_err()
                .contains("not a number")
        );
        assert!(meminfo("MemTotal: 5 MB\n").unwrap_err().contains("kB"));
        let big = format!("MemTotal: {} kB\n", u64::MAX);
        assert!(meminfo(&big).unwrap_err().contains("overflows"));
        let more = "MemTotal: 10 kB\nMemAvailable: 11 kB\n";
        assert!(meminfo(more).unwrap_err().contains("larger"));
        let equal = "MemTotal: 10 kB\nMemAvailable: 10 kB\n";
        assert_eq!(meminfo(equal), Ok((10_240, Some(10_240))));
    }

    #[test]
    fn statm() {
        assert_eq!(
            statm_resident_bytes("10352 1530 1137 6 0 421 0\n", 4096),
            Ok(1530 * 4096)
        );
        assert_eq!(statm_resident_bytes("1 0 0 0 0 0 0", 16384), Ok(0));
        assert!(
            statm_resident_bytes("", 4096)
                .unwrap_err()
                .contains("empty")
        );
        assert!(
            statm_resident_bytes("12", 4096)
                .unwrap_err()
                .contains("no resident")
        );
        assert!(
            statm_resident_bytes("1 x2 3", 4096)
                .unwrap_err()
                .contains("not a number")
        );
        assert!(
            statm_resident_bytes("1 -2 3", 4096)
                .unwrap_err()
                .contains("not a number")
        );
        let big = format!("1 {} 0", u64::MAX / 2);
        assert!(
            statm_resident_bytes(&big, 4096)
                .unwrap_err()
                .contains("overflows")
        );
    }

    #[test]
    fn status() {
        let text = "Name:\tcat\nUmask:\t0022\nVmPeak:\t    8432 kB\nVmRSS:\t    1920 kB\nRssAnon:\t  96 kB\n";
        assert_eq!(status_vmrss_bytes(text), Ok(1920 * 1024));
        assert!(
            status_vmrss_bytes("Name:\tkthreadd\n")
                .unwrap_err()
                .contains("no VmRSS")
        );
        assert!(
            status_vmrss_bytes("VmRSS:\t12 MB\n")
                .unwrap_err()
                .contains("unit")
        );
        assert!(
            status_vmrss_bytes("VmRSS:\t\n")
                .unwrap_err()
                .contains("no value")
        );
        assert!(
            status_vmrss_bytes("VmRSS: 99999999999999999999 kB")
                .unwrap_err()
                .contains("not a number")
        );
        assert!(
            status_vmrss_bytes(&format!("VmRSS: {} kB", u64::MAX))
                .unwrap_err()
                .contains("overflows")
        );
    }

    #[test]
    fn clip_is_char_safe() {
        let s = "é".repeat(100);
        assert_eq!(clip(&s).chars().count(), 60);
        assert_eq!(clip("short"), "short");
    }
}
