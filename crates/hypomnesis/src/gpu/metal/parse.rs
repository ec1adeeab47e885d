//! Pure helpers of the Metal backend: C buffers to text, the ledger entry lookup, process names
//! and the device figures. No I/O, so they compile and are tested on every OS.

/// The name of the XNU task-ledger entry that charges GPU memory to a process.
pub(crate) const GRAPHICS_FOOTPRINT: &str = "graphics_footprint";

/// The text of a C `char` buffer: the bytes before the first NUL, or the whole buffer when the
/// terminator is missing (never reading past it); invalid UTF-8 is replaced with U+FFFD.
#[must_use]
pub(crate) fn c_buffer_text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(buf.get(..end).unwrap_or_default()).into_owned()
}

/// The position of the entry named `wanted` among ledger template names (each a C `char`
/// buffer), or `None` when no entry has that name.
#[must_use]
pub(crate) fn ledger_index<'a>(
    names: impl IntoIterator<Item = &'a [u8]>,
    wanted: &str,
) -> Option<usize> {
    names
        .into_iter()
        .position(|name| c_buffer_text(name) == wanted)
}

/// The last component of a path (`/Applications/Foo.app/Contents/MacOS/Foo` → `Foo`), trailing
/// slashes ignored; `None` when there is no component (empty, `/`, `///`).
#[must_use]
pub(crate) fn basename(path: &str) -> Option<String> {
    path.trim_end_matches('/')
        .rsplit('/')
        .next()
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// A ledger balance as bytes; `None` for a negative balance, which is not a size.
#[must_use]
pub(crate) fn balance_bytes(balance: i64) -> Option<u64> {
    u64::try_from(balance).ok()
}

/// What the CPU brand string says about the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Chip {
    /// Apple silicon; the chip name (`Apple M2 Max`) unless running translated by Rosetta,
    /// where the brand string names the emulated CPU instead.
    AppleSilicon(Option<String>),
    /// Anything else (an Intel Mac); the brand string as read.
    Other(String),
}

/// Classify a Mac from `machdep.cpu.brand_string` and `sysctl.proc_translated` (true when this
/// process runs under Rosetta, which reports a brand string like `VirtualApple @ 2.50GHz`).
#[must_use]
pub(crate) fn classify_chip(brand: &str, translated: bool) -> Chip {
    let brand = brand.trim();
    if brand.starts_with("Apple") {
        Chip::AppleSilicon(Some(brand.to_owned()))
    } else if translated {
        Chip::AppleSilicon(None)
    } else {
        Chip::Other(brand.to_owned())
    }
}

/// Device-wide figures of the unified memory, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Figures {
    /// What is left of Metal's recommended working set, at most `total`.
    pub(crate) free: u64,
    /// `total - free`.
    pub(crate) used: u64,
}

/// The figures of a device with `total` bytes of unified memory, a recommended working set of
/// `budget` bytes, and the given per-process GPU footprints: free is the budget minus the
/// footprints (saturating at 0, and never above `total`), used is `total - free`. Free is the
/// working-set budget left, not a hardware counter.
#[must_use]
pub(crate) fn figures(
    total: u64,
    budget: u64,
    footprints: impl IntoIterator<Item = u64>,
) -> Figures {
    let held = footprints.into_iter().fold(0_u64, u64::saturating_add);
    let free = budget.saturating_sub(held).min(total);
    Figures {
        free,
        used: total - free,
    }
}

/// A byte count for `hmn doctor`: `17179869184 bytes (16.0 GiB)`.
#[must_use]
pub(crate) fn bytes_text(bytes: u64) -> String {
    #[allow(clippy::cast_precision_loss)] // one decimal of GiB is all that is shown
    let gib = bytes as f64 / f64::from(1_u32 << 30);
    format!("{bytes} bytes ({gib:.1} GiB)")
}

/// When a walk over the process table read no process at all, how many it could not read and
/// why, in words: at least the walking process is always readable, so an empty walk means the
/// system refused the reads (a sandbox), not that no GPU memory is held. `None` when `read` is
/// above 0.
#[must_use]
pub(crate) fn walk_refusal(
    read: usize,
    other_users: u64,
    unreadable: u64,
    last_reason: Option<&str>,
) -> Option<(u32, String)> {
    if read > 0 {
        return None;
    }
    let refused = u32::try_from(other_users.saturating_add(unreadable)).unwrap_or(u32::MAX);
    let last = last_reason
        .map(|r| format!("; last: {r}"))
        .unwrap_or_default();
    Some((
        refused,
        format!(
            "ledger(LEDGER_ENTRY_INFO) could read no process, not even this one ({other_users} \
             refused as other users', {unreadable} unreadable{last})"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 32-byte `char` buffer as the kernel fills it.
    fn field(s: &str) -> [u8; 32] {
        let mut out = [0_u8; 32];
        for (o, b) in out.iter_mut().zip(s.bytes()) {
            *o = b;
        }
        out
    }

    #[test]
    fn an_empty_walk_is_a_refusal_and_says_what_was_refused() {
        assert_eq!(walk_refusal(1, 300, 2, Some("x")), None);
        let (n, why) = walk_refusal(0, 300, 2, Some("pid 7: EINVAL")).unwrap_or_default();
        assert_eq!(n, 302);
        assert!(
            why.contains("300 refused") && why.contains("2 unreadable"),
            "{why}"
        );
        assert!(why.ends_with("; last: pid 7: EINVAL)"), "{why}");
        let (n, why) = walk_refusal(0, 0, 0, None).unwrap_or_default();
        assert_eq!((n, why.contains("last")), (0, false));
        assert_eq!(
            walk_refusal(0, u64::MAX, 1, None).map(|r| r.0),
            Some(u32::MAX)
        );
    }

    #[test]
    fn c_buffers() {
        assert_eq!(c_buffer_text(b"Apple M2 Max\0\0\0"), "Apple M2 Max");
        assert_eq!(c_buffer_text(b"abc\0def\0"), "abc");
        assert_eq!(c_buffer_text(b""), "");
        assert_eq!(c_buffer_text(b"\0garbage"), "");
        // No terminator: the whole buffer, nothing past it.
        assert_eq!(c_buffer_text(b"unterminated"), "unterminated");
        assert_eq!(c_buffer_text(&[b'x'; 32]), "x".repeat(32));
        // Invalid UTF-8 is replaced, not a panic.
        assert_eq!(c_buffer_text(&[0xFF, b'a', 0]), "\u{FFFD}a");
    }

    #[test]
    fn ledger_lookup() {
        let names = [
            field("cpu_time"),
            field("tkm_private"),
            field("phys_footprint"),
            field("graphics_footprint_compressed"),
            field(GRAPHICS_FOOTPRINT),
            field("graphics_nofootprint"),
        ];
        assert_eq!(
            ledger_index(names.iter().map(<[u8; 32]>::as_slice), GRAPHICS_FOOTPRINT),
            Some(4)
        );
        assert_eq!(
            ledger_index(names.iter().map(<[u8; 32]>::as_slice), "phys_footprint"),
            Some(2)
        );
        // A prefix or a longer name never matches.
        assert_eq!(
            ledger_index([b"graphics\0".as_slice()], GRAPHICS_FOOTPRINT),
            None
        );
        assert_eq!(
            ledger_index([b"graphics_footprintX\0".as_slice()], GRAPHICS_FOOTPRINT),
            None
        );
        // Empty, unterminated and garbage names.
        assert_eq!(ledger_index(std::iter::empty(), GRAPHICS_FOOTPRINT), None);
        let hostile: [&[u8]; 3] = [&[0xFF; 32], &[b'g'; 32], b"graphics_footprint"];
        assert_eq!(ledger_index(hostile, GRAPHICS_FOOTPRINT), Some(2));
        // The first of duplicates wins.
        let dup = [field(GRAPHICS_FOOTPRINT), field(GRAPHICS_FOOTPRINT)];
        assert_eq!(
            ledger_index(dup.iter().map(<[u8; 32]>::as_slice), GRAPHICS_FOOTPRINT),
            Some(0)
        );
    }

    #[test]
    fn basenames() {
        assert_eq!(
            basename("/Applications/Foo.app/Contents/MacOS/Foo").as_deref(),
            Some("Foo")
        );
        assert_eq!(basename("/usr/bin/python3").as_deref(), Some("python3"));
        assert_eq!(basename("python3").as_deref(), Some("python3"));
        assert_eq!(basename("/usr/local/bin/").as_deref(), Some("bin"));
        assert_eq!(basename("with space/my app").as_deref(), Some("my app"));
        assert_eq!(basename(""), None);
        assert_eq!(basename("/"), None);
        assert_eq!(basename("///"), None);
    }

    #[test]
    fn balances() {
        assert_eq!(balance_bytes(0), Some(0));
        assert_eq!(balance_bytes(123_456), Some(123_456));
        assert_eq!(balance_bytes(i64::MAX), Some(i64::MAX.unsigned_abs()));
        assert_eq!(balance_bytes(-1), None);
        assert_eq!(balance_bytes(i64::MIN), None);
    }

    #[test]
    fn chips() {
        assert_eq!(
            classify_chip("Apple M2 Max", false),
            Chip::AppleSilicon(Some("Apple M2 Max".into()))
        );
        assert_eq!(
            classify_chip("  Apple M1\n", false),
            Chip::AppleSilicon(Some("Apple M1".into()))
        );
        assert_eq!(
            classify_chip("VirtualApple @ 2.50GHz processor", true),
            Chip::AppleSilicon(None)
        );
        assert_eq!(
            classify_chip("Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz", false),
            Chip::Other("Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz".into())
        );
        assert_eq!(classify_chip("", false), Chip::Other(String::new()));
    }

    #[test]
    fn device_figures() {
        use crate::types::GIB;
        // 64 GiB machine, 48 GiB budget, 3 GiB held.
        let f = figures(64 * GIB, 48 * GIB, [GIB, 2 * GIB]);
        assert_eq!(f.free, 45 * GIB);
        assert_eq!(f.used, 19 * GIB);
        assert_eq!(f.free + f.used, 64 * GIB);
        // Nothing held: the whole budget is free.
        assert_eq!(figures(64 * GIB, 48 * GIB, []).free, 48 * GIB);
        // More held than the budget: free saturates at 0, used is the total.
        let over = figures(16 * GIB, 10 * GIB, [8 * GIB, 8 * GIB]);
        assert_eq!((over.free, over.used), (0, 16 * GIB));
        // Hostile sums do not overflow.
        let huge = figures(16 * GIB, 10 * GIB, [u64::MAX, u64::MAX]);
        assert_eq!((huge.free, huge.used), (0, 16 * GIB));
        // A budget above the total is capped at the total.
        let capped = figures(8 * GIB, 20 * GIB, [GIB]);
        assert_eq!((capped.free, capped.used), (8 * GIB, 0));
        assert_eq!(figures(0, 0, []), Figures { free: 0, used: 0 });
    }

    #[test]
    fn byte_text() {
        assert_eq!(bytes_text(16 << 30), "17179869184 bytes (16.0 GiB)");
        assert_eq!(bytes_text(0), "0 bytes (0.0 GiB)");
    }
}
