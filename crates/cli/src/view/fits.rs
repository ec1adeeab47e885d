//! `hmn fits`'s one line.

use super::format_size;
use super::printable::printable;

/// The question and the device's answer.
pub struct Verdict<'a> {
    pub size: u64,
    pub index: u32,
    pub name: Option<&'a str>,
    pub free: u64,
}

impl Verdict<'_> {
    /// Whether `size` bytes fit in what is free.
    pub fn fits(&self) -> bool {
        self.size <= self.free
    }
}

/// Below 1 MiB in bytes (`1 byte`, `512 bytes`), else as every size.
fn bytes_or_size(b: u64) -> String {
    match b {
        1 => "1 byte".into(),
        b if b < (1 << 20) => format!("{b} bytes"),
        b => format_size(b),
    }
}

/// `hmn: 12.0 GiB fits on GPU 0 [NVIDIA H200]: 139.8 GiB free` or `… does not fit …: 3.2 GiB
/// free, 8.8 GiB short`. Sizes below 1 MiB are given in bytes too.
pub fn verdict_line(v: &Verdict<'_>) -> String {
    let name = v
        .name
        .map_or(String::new(), |n| format!(" [{}]", printable(n)));
    let size = bytes_or_size(v.size);
    if v.fits() {
        format!(
            "hmn: {size} fits on GPU {}{name}: {} free",
            v.index,
            format_size(v.free)
        )
    } else {
        format!(
            "hmn: {size} does not fit on GPU {}{name}: {} free, {} short",
            v.index,
            format_size(v.free),
            bytes_or_size(v.size - v.free)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::{GIB, MIB};

    #[test]
    fn lines() {
        let mut v = Verdict {
            size: 12 * GIB,
            index: 0,
            name: Some("NVIDIA H200"),
            free: 100 * GIB,
        };
        assert!(v.fits());
        assert_eq!(
            verdict_line(&v),
            "hmn: 12.0 GiB fits on GPU 0 [NVIDIA H200]: 100.0 GiB free"
        );
        v.free = 3 * GIB + 200 * MIB;
        v.name = None;
        assert!(!v.fits());
        assert_eq!(
            verdict_line(&v),
            "hmn: 12.0 GiB does not fit on GPU 0: 3.2 GiB free, 8.8 GiB short"
        );
        v.size = v.free;
        assert!(v.fits(), "exactly what is free fits");
        v.size = 512;
        assert_eq!(
            verdict_line(&v),
            "hmn: 512 bytes fits on GPU 0: 3.2 GiB free"
        );
        v.size = v.free + 1;
        assert!(
            verdict_line(&v).ends_with(", 1 byte short"),
            "{}",
            verdict_line(&v)
        );
    }
}
